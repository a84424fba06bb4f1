/**
 * The log messages that `deploy.sh`'s log-based metrics count (`ops/alert-config.ts`), apart from
 * the policies that log them (`late-runs.ts`, `missed-runs.ts`, `pauses.ts`): those load the
 * Firestore client, and `node ops/alerts.ts`, which only writes the metrics' JSON, need not.
 */

/** The log message of a late slot (WARNING), for the log-based metric `late_runs`. */
export const LATE_RUN = 'late run';

/** The log messages of missed-run detection (ERROR), for log-based metrics. */
export const MISSED_RUN = 'missed run';
export const FAILED_AFTER_RETRIES = 'run failed after retries';

/** The log message of a slot judged inside a pause. */
export const PAUSED_SLOT = 'paused slot';
