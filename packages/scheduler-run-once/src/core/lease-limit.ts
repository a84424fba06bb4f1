/**
 * The longest lease, apart from the run record's schema (`run-record.ts`) that loads the Firestore
 * client: `function/config.ts` checks LEASE_SECONDS against it, and `deploy.sh`'s
 * `node ops/jobs.ts --deploy`, which reads that config and no record, need not load the client.
 */

/** The longest lease a record may carry, ms (a day, the largest LEASE_SECONDS); longer: unreadable. */
export const MAX_LEASE_MS = 86_400_000;
