/**
 * The collection of per-job documents (the check cursor and pauses, the overlap lock) beside a
 * runs collection: `RUNS_COLLECTION` + `_jobs`.
 *
 * @example jobStateCollection('scheduler_runs') // 'scheduler_runs_jobs'
 */
export function jobStateCollection(runsCollection: string): string {
  return `${runsCollection}_jobs`;
}
