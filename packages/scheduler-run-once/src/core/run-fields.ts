/**
 * The run record's vocabulary: its statuses, kinds and field names, as plain constants. Kept apart
 * from `run-record.ts` (which loads the Firestore client for its converter and timestamps) so that
 * what `deploy.sh` runs with node (`ops/indexes.ts`) reads the field names without that client.
 */

/**
 * Run statuses: the guide's sample's, plus `failed` (a retry claims it at once), `missed` (no
 * attempt came; reported by missed-run detection) and `skipped` (overlap policy `skip`; final);
 * their transitions: docs/how-it-works.md, "The run record and its lease".
 */
export const RunStatus = {
  InProgress: 'in_progress',
  Completed: 'completed',
  Failed: 'failed',
  Missed: 'missed',
  Skipped: 'skipped',
} as const;
export type RunStatus = (typeof RunStatus)[keyof typeof RunStatus];

/** What a run is: its slot's run, Scheduler's "Force run", a manual run, or a re-run of a slot. */
export const RunKind = {
  Slot: 'slot',
  Forced: 'forced',
  Manual: 'manual',
  Rerun: 'rerun',
} as const;
export type RunKind = (typeof RunKind)[keyof typeof RunKind];

/** A run document's field names (the guide's sample's where it has one); see {@link RunRecord}. */
export const Field = {
  status: 'status',
  attemptId: 'attempt_id',
  /** Server time of the claim, takeover or last lease extension. */
  leasedAt: 'leased_at',
  /** Lease length from `leased_at`, ms. */
  leaseMs: 'lease_ms',
  /** When a Firestore TTL policy may delete the document (TTL deletion lags up to days). */
  expireAt: 'expire_at',
  claimedAt: 'claimed_at',
  firstClaimedAt: 'first_claimed_at',
  attempts: 'attempts',
  completedAt: 'completed_at',
  failedAt: 'failed_at',
  lastError: 'last_error',
  reportedAt: 'reported_at',
  reportedBy: 'reported_by',
  /** The check that claimed logging again a report its writer never marked logged. */
  relogBy: 'relog_by',
  kind: 'run_kind',
  rerunOf: 'rerun_of',
  scheduleTimeSent: 'schedule_time_sent',
  /** When the run audit last delivered the slot itself (catch-up). */
  caughtUpAt: 'caught_up_at',
  blockedBy: 'blocked_by',
  notes: 'notes',
  keyScope: 'key_scope',
  jobName: 'job_name',
  scheduleTime: 'schedule_time',
  /**
   * A slot's claim: the schedule and time zone its job declared in the revision that claimed it,
   * a sighting of that rule at `claimed_at` (docs/how-it-works.md, "The schedule in force").
   */
  schedule: 'schedule',
  timeZone: 'time_zone',
} as const;
