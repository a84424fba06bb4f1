/** The collection of per-job documents (cursors, pauses, overlap locks): `RUNS_COLLECTION_jobs`. */
export function jobStateCollection(runsCollection: string): string {
  return `${runsCollection}_jobs`;
}
