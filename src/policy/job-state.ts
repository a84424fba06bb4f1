/**
 * Where a job's own state lives: a collection beside the runs collection, one small document per
 * job and concern (how far missed-run detection has checked, which run holds the overlap lock),
 * read and written through a `RunDocuments` of its own. Every instance sees it, so work done once
 * for a job is not done again by another instance or after a cold start.
 */

/**
 * The collection of per-job documents for a runs collection: `RUNS_COLLECTION` + `_jobs`.
 *
 * @example jobStateCollection('scheduler_runs') // 'scheduler_runs_jobs'
 */
export function jobStateCollection(runsCollection: string): string {
  return `${runsCollection}_jobs`;
}
