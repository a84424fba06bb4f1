/**
 * The collection of per-job documents (check cursors and pauses, overlap locks) beside a runs
 * collection: `RUNS_COLLECTION` + `_jobs`, e.g. `scheduler_runs_jobs`.
 */
export function jobStateCollection(runsCollection: string): string {
  return `${runsCollection}_jobs`;
}
