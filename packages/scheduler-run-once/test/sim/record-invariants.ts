/**
 * Invariant 21, records that tell the truth: every run record left at the end of a history says
 * what happened to its run, judged against what the jobs executed (not against the product's own
 * rules). A record is what `runs`, `runs --check`, backfill and a later delivery read; one that lies
 * (a completion naming an attempt that never returned, a failure without its error, a report without
 * its reporter, a run filed under another job, slot or scope) breaks the promise as surely as a run
 * executed twice. Records another version wrote (`foreign_record`) are theirs and are not judged.
 *
 * Kept in its own file (issue 40, mutation testing): the survivors of `record-writes.ts` and of the
 * fenced writes of `run-once.ts` it kills are listed in docs/tests.md, "Mutation testing".
 */
import { Timestamp } from '@google-cloud/firestore';
import { AUDIT_JOB_ID } from './model.ts';
import type { Execution, SimOutcome } from './simulator.ts';

/** The statuses whose records an attempt of this version wrote (another version's are skipped). */
const ATTEMPTED = new Set(['in_progress', 'completed', 'failed']);
const UNATTEMPTED = new Set(['missed', 'skipped']);

/** `value` as ms if it is a stored timestamp, else `undefined`. */
export function millisOf(value: unknown): number | undefined {
  return value instanceof Timestamp ? value.toMillis() : undefined;
}

/**
 * Two times that name the same instant: the store keeps microseconds and the product's `Date`s
 * hold milliseconds, so a write's time read back may differ by the rounding.
 */
function sameMs(a: number | undefined, b: number): boolean {
  return a !== undefined && Math.abs(a - b) <= 1;
}

/** A non-empty string, as every id and message field must be. */
function isNamed(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0;
}

/**
 * The executions of a record's attempt, by instance, start and result: attempt ids are random, and
 * a violation must read the same when its history replays.
 */
function describeOwn(own: readonly Execution[]): string {
  const described = own.map(
    (e) =>
      `${e.result} on ${e.instance} from ${new Date(e.start).toISOString()}`,
  );
  return described.join(', ') || 'it never executed';
}

/** The executions of each run, by run id. */
function executionsOf(outcome: SimOutcome): Map<string, Execution[]> {
  const byRun = new Map<string, Execution[]>();
  for (const e of outcome.executions) {
    byRun.set(e.runId, [...(byRun.get(e.runId) ?? []), e]);
  }
  return byRun;
}

/**
 * Invariant 21: every record of this version is consistent with its run's executions and with
 * itself. `completed`: its attempt is one that executed and returned, with `completed_at`.
 * `failed`: its attempt executed and threw, with `failed_at` and the error. Every attempted record
 * counts at least as many attempts as executed, its first claim no later than its last, and names
 * the job, slot and kind its executions ran as, and is stamped caught up or sent without a schedule
 * time only as it was asked for. `missed` and `skipped`: no attempt, no execution. A report has both
 * its time and its reporter; every record has its TTL.
 */
export function recordsTellTheTruth(outcome: SimOutcome): string[] {
  const found: string[] = [];
  const byRun = executionsOf(outcome);
  for (const [runId, record] of outcome.records) {
    if (outcome.foreignRecords?.has(runId) === true) {
      continue;
    }
    const status = record.status;
    if (typeof status !== 'string') {
      continue;
    }
    // The run audit is a job the simulator does not record as executions: only its record's own
    // consistency is judged.
    if (record.job_name === AUDIT_JOB_ID) {
      found.push(
        ...selfConsistency(record).map(
          (p) => `audit record ${runId.slice(0, 12)} ${p}`,
        ),
      );
      continue;
    }
    const execs = byRun.get(runId) ?? [];
    const problems = [
      ...selfConsistency(record),
      ...(ATTEMPTED.has(status) ? attemptedProblems(record, execs) : []),
      ...(UNATTEMPTED.has(status) ? unattemptedProblems(record, execs) : []),
      ...identityProblems(record, execs),
      ...claimDetailProblems(
        record,
        execs,
        outcome.createTimes?.get(runId),
        outcome.catchUps.some((c) => c.runId === runId),
      ),
      ...stampProblems(record, execs, (e) => declaredRule(outcome, e)),
    ];
    for (const problem of problems) {
      found.push(
        `record ${runId.slice(0, 12)} (${String(record.job_name)}, ${status}) ${problem}`,
      );
    }
  }
  return [
    ...found,
    ...scopesTellTheTruth(outcome),
    ...contextsTellTheTruth(outcome),
  ];
}

/** What any record must hold by itself: a TTL, and a report's time and reporter together. */
function selfConsistency(record: Readonly<Record<string, unknown>>): string[] {
  const problems: string[] = [];
  if (millisOf(record.expire_at) === undefined) {
    problems.push('has no expire_at: the TTL never deletes it');
  }
  const reportedAt = millisOf(record.reported_at);
  const hasReporter = isNamed(record.reported_by);
  if ((reportedAt === undefined) !== !hasReporter) {
    problems.push(
      `has reported_at ${String(record.reported_at)} but reported_by ${String(record.reported_by)}: a report needs both`,
    );
  }
  return problems;
}

/** An attempt's record against its run's executions. */
function attemptedProblems(
  record: Readonly<Record<string, unknown>>,
  execs: readonly Execution[],
): string[] {
  const problems: string[] = [];
  const attemptId = record.attempt_id;
  if (!isNamed(attemptId)) {
    return ['names no attempt'];
  }
  const executedAttempts = new Set(execs.map((e) => e.attemptId));
  const attempts = record.attempts;
  if (typeof attempts !== 'number' || attempts < executedAttempts.size) {
    problems.push(
      `counts ${String(attempts)} attempts, but ${executedAttempts.size} executed`,
    );
  }
  const claimedAt = millisOf(record.claimed_at);
  const firstClaimedAt = millisOf(record.first_claimed_at);
  if (
    claimedAt === undefined ||
    firstClaimedAt === undefined ||
    firstClaimedAt > claimedAt
  ) {
    problems.push(
      `has claimed_at ${String(record.claimed_at)} and first_claimed_at ${String(record.first_claimed_at)}: the first claim must come no later than the last`,
    );
  }
  const own = execs.filter((e) => e.attemptId === attemptId);
  if (record.status === 'completed') {
    problems.push(...completedProblems(record, own, claimedAt));
  }
  if (record.status === 'failed') {
    problems.push(...failedProblems(record, own));
  }
  if (
    record.status === 'in_progress' &&
    millisOf(record.leased_at) === undefined
  ) {
    problems.push('is in progress without a lease');
  }
  if (record.status === 'in_progress' && reportedSinceLease(record)) {
    problems.push(
      'is still in progress under the lease a check reported lapsed: `runs` shows a run reported failed as running (the report ends it failed)',
    );
  }
  return problems;
}

/**
 * Whether a report was written at or after the record's last lease: the missed-run check's report
 * of a lapsed claim (`reportFailure` in `ledger.ts`), which ends the run `failed`
 * (docs/how-it-works.md, "The run ledger in detail"). A claim that re-opened the run since (a
 * backfill, a re-run) leases it after the report.
 */
function reportedSinceLease(
  record: Readonly<Record<string, unknown>>,
): boolean {
  const reportedAt = millisOf(record.reported_at);
  const leasedAt = millisOf(record.leased_at);
  return (
    reportedAt !== undefined && leasedAt !== undefined && reportedAt >= leasedAt
  );
}

/** A `completed` record: its attempt returned, and the completion's time is after its claim. */
function completedProblems(
  record: Readonly<Record<string, unknown>>,
  own: readonly Execution[],
  claimedAt: number | undefined,
): string[] {
  const problems: string[] = [];
  if (!own.some((e) => e.result === 'returned')) {
    problems.push(
      `names an attempt that never returned (${describeOwn(own)}): a completion the job did not earn`,
    );
  }
  const completedAt = millisOf(record.completed_at);
  if (
    completedAt === undefined ||
    (claimedAt !== undefined && completedAt < claimedAt)
  ) {
    problems.push(`has completed_at ${String(record.completed_at)}`);
  }
  return problems;
}

/** A `failed` record: its attempt threw, and the record keeps when and why. */
function failedProblems(
  record: Readonly<Record<string, unknown>>,
  own: readonly Execution[],
): string[] {
  const problems: string[] = [];
  // The missed-run check ends a lapsed claim `failed` and reported (`reportFailure`): its attempt
  // may never have executed. Only an attempt's own release leaves a record failed unreported.
  const endedByCheck = millisOf(record.reported_at) !== undefined;
  if (!endedByCheck && !own.some((e) => e.result === 'threw')) {
    problems.push(`names an attempt that never threw (${describeOwn(own)})`);
  }
  if (millisOf(record.failed_at) === undefined || !isNamed(record.last_error)) {
    problems.push(
      `has failed_at ${String(record.failed_at)} and last_error ${JSON.stringify(record.last_error)}: a failure keeps when and why`,
    );
  }
  if (record.leased_at !== undefined || record.lease_ms !== undefined) {
    problems.push('keeps a lease after its attempt released it');
  }
  return problems;
}

/** A `missed` or `skipped` record: no attempt claimed it and nothing executed it. */
function unattemptedProblems(
  record: Readonly<Record<string, unknown>>,
  execs: readonly Execution[],
): string[] {
  const problems: string[] = [];
  if (record.attempts !== 0 || record.attempt_id !== undefined) {
    problems.push(
      `counts ${String(record.attempts)} attempts${record.attempt_id === undefined ? '' : ' and names an attempt'}, but no attempt claimed it`,
    );
  }
  if (execs.length > 0) {
    problems.push(
      `but its run executed ${execs.length} time(s): the record hides a run`,
    );
  }
  if (record.status === 'skipped' && !isNamed(record.blocked_by)) {
    problems.push('names no run that blocked it');
  }
  if (
    record.status === 'missed' &&
    millisOf(record.reported_at) === undefined
  ) {
    problems.push('is missed but not reported');
  }
  return problems;
}

/** The job, slot and kind the record names, against those its executions ran as. */
function identityProblems(
  record: Readonly<Record<string, unknown>>,
  execs: readonly Execution[],
): string[] {
  const problems: string[] = [];
  if (!isNamed(record.job_name)) {
    problems.push('names no job');
  }
  for (const e of execs) {
    if (record.job_name !== e.jobId) {
      problems.push(`names job ${String(record.job_name)}, but ran ${e.jobId}`);
    }
    // A Force run's Scheduler retries are its run with their own times (force-run.ts): only a
    // slot's run id is its schedule time's.
    const slot = millisOf(record.schedule_time);
    if (e.kind === 'slot' && slot !== e.scheduleTime) {
      problems.push(
        `names schedule time ${String(slot === undefined ? record.schedule_time : new Date(slot).toISOString())}, but ran as ${new Date(e.scheduleTime).toISOString()}`,
      );
    }
    const kind = record.run_kind ?? 'slot';
    if (kind !== e.kind) {
      problems.push(`is a ${String(kind)} run, but ran as a ${e.kind} run`);
    }
  }
  return [...new Set(problems)];
}

/**
 * What a claim writes of its delivery and the record keeps: a re-run names the slot's run it
 * re-runs (`rerun_of`, as its job's context had it) and no other run has one; a run claimed by the
 * run audit's catch-up of a late slot is stamped `caught_up_at`, and only a run its catch-up was
 * sent for (`catchUpSent`); `schedule_time_sent: false` only on a run Force runs executed (a Force
 * run sent without a schedule time is the one delivery that carries none). A record stamped
 * otherwise tells the operator a run was caught up, or forced without its slot, when it was not.
 * Judged on executions that ran under the record as it stands (created no later than they
 * started): a repair may delete a record and a later claim create it again without them.
 */
function claimDetailProblems(
  record: Readonly<Record<string, unknown>>,
  execs: readonly Execution[],
  createdAt: number | undefined,
  catchUpSent: boolean,
): string[] {
  const problems: string[] = [];
  if (record.caught_up_at !== undefined && !catchUpSent) {
    problems.push('has caught_up_at, but no catch-up was sent for its run');
  }
  const underThisRecord = execs.filter(
    (e) => createdAt !== undefined && createdAt <= e.start,
  );
  for (const e of underThisRecord) {
    const rerunOf = e.kind === 'rerun' ? e.context?.rerunOf : undefined;
    if (record.rerun_of !== rerunOf) {
      problems.push(
        `names rerun_of ${String(record.rerun_of)}, but ran as a ${e.kind} run${rerunOf === undefined ? '' : ` of ${rerunOf}`}`,
      );
    }
    if (e.context?.caughtUp === true && record.caught_up_at === undefined) {
      problems.push('has no caught_up_at, but ran as a catch-up of its slot');
    }
    if (record.schedule_time_sent === false && e.source !== 'force') {
      problems.push(
        `says no schedule time was sent, but ran from a ${e.source} delivery`,
      );
    }
  }
  return [...new Set(problems)];
}

/** The schedule and time zone execution `e`'s revision declared for its job. */
function declaredRule(outcome: SimOutcome, e: Execution): string | undefined {
  const revision = outcome.deployments[e.deployment]?.revisions[e.revision];
  const job = revision?.jobs.find((j) => j.id === e.jobId);
  return job === undefined ? undefined : `${job.schedule} in ${job.timeZone}`;
}

/**
 * The rule a slot's first claim stamps (`schedule`, `time_zone`): the missed-run check takes it for
 * a sighting of that rule at the slot's time (docs/how-it-works.md, "A rule no check saw"). Only
 * Scheduler's delivery of a slot stamps one, so a record of another kind has none; and a record one
 * attempt claimed, which executed as Scheduler's delivery, names the rule that attempt's revision
 * declared. A stamp naming another revision's rule would place a schedule change where none was.
 */
function stampProblems(
  record: Readonly<Record<string, unknown>>,
  execs: readonly Execution[],
  ruleOf: (e: Execution) => string | undefined,
): string[] {
  if (record.schedule === undefined && record.time_zone === undefined) {
    return [];
  }
  const stamped = `${String(record.schedule)} in ${String(record.time_zone)}`;
  const kind = record.run_kind ?? 'slot';
  if (kind !== 'slot') {
    return [`is a ${String(kind)} run, but stamps the rule ${stamped}`];
  }
  const claimer = execs.find((e) => e.attemptId === record.attempt_id);
  if (
    record.attempts === 1 &&
    claimer?.source === 'scheduler' &&
    claimer.context?.caughtUp !== true &&
    ruleOf(claimer) !== stamped
  ) {
    return [
      `stamps the rule ${stamped}, but its one claim was ${claimer.instance}'s, whose revision declares ${String(ruleOf(claimer))}`,
    ];
  }
  return [];
}

/**
 * The key scope each record names: one value per deployment, empty exactly when its deployment has
 * no scope, and different for deployments of different scopes (their runs must never meet).
 */
function scopesTellTheTruth(outcome: SimOutcome): string[] {
  const found: string[] = [];
  const scopesOfDeployment = new Map<number, Set<unknown>>();
  for (const e of outcome.executions) {
    const record = outcome.records.get(e.runId);
    if (record === undefined || outcome.foreignRecords?.has(e.runId) === true) {
      continue;
    }
    const seen = scopesOfDeployment.get(e.deployment) ?? new Set();
    seen.add(record.key_scope);
    scopesOfDeployment.set(e.deployment, seen);
  }
  const owner = new Map<unknown, string>();
  for (const [deployment, seen] of scopesOfDeployment) {
    const scope = outcome.deployments[deployment]?.keyScope ?? [];
    const named = `deployment ${deployment} (scope ${JSON.stringify(scope)})`;
    if (seen.size !== 1) {
      found.push(
        `${named}: its records name key scopes ${[...seen].map(String).join(', ')}`,
      );
    }
    for (const keyScope of seen) {
      if (
        typeof keyScope !== 'string' ||
        (keyScope === '') !== (scope.length === 0)
      ) {
        found.push(
          `${named}: a record names key scope ${JSON.stringify(keyScope)}`,
        );
      }
      const other = owner.get(keyScope);
      const scopeKey = JSON.stringify(scope);
      if (other !== undefined && other !== scopeKey) {
        found.push(
          `${named}: key scope ${String(keyScope)} is also another scope's (${other})`,
        );
      }
      owner.set(keyScope, scopeKey);
    }
  }
  return found;
}

/**
 * Invariant 21, the job's side: what a job's context said of its claim as it started agrees with
 * the history. Its job name and slot are the ones it ran as; its `leaseExpires` is the end of a
 * lease its own attempt's write landed (memory store only); its `firstClaimedAt` came before it
 * started, and is the record's when the record still names its attempt.
 */
export function contextsTellTheTruth(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const e of outcome.executions) {
    const seen = e.context;
    if (seen === undefined) {
      continue;
    }
    const problems: string[] = [];
    if (seen.jobName !== e.jobId) {
      problems.push(`its context named job ${seen.jobName}`);
    }
    const standsForSlot = e.kind === 'slot' || e.kind === 'rerun';
    if (seen.slot !== (standsForSlot ? e.scheduleTime : undefined)) {
      problems.push(`its context named slot ${String(seen.slot)}`);
    }
    if (!(seen.firstClaimedAt <= e.start)) {
      problems.push(
        `its context's firstClaimedAt ${String(seen.firstClaimedAt)} is after it started`,
      );
    }
    const record = outcome.records.get(e.runId);
    const recordFirst = millisOf(record?.first_claimed_at);
    if (
      record?.attempt_id === e.attemptId &&
      outcome.foreignRecords?.has(e.runId) !== true &&
      !sameMs(recordFirst, seen.firstClaimedAt)
    ) {
      problems.push(
        `its context's firstClaimedAt ${String(seen.firstClaimedAt)} is not its record's ${String(recordFirst)}`,
      );
    }
    const leases = outcome.leaseEnds.get(e.attemptId);
    if (
      !outcome.emulator &&
      leases !== undefined &&
      !leases.some((l) => sameMs(l.expires, seen.leaseExpires))
    ) {
      problems.push(
        `its context's leaseExpires ${String(seen.leaseExpires)} is no lease its attempt's writes landed (${leases.map((l) => l.expires).join(', ')})`,
      );
    }
    for (const problem of problems) {
      found.push(
        `${e.jobId}@${new Date(e.scheduleTime).toISOString()} on ${e.instance} from ${new Date(e.start).toISOString()}: ${problem}`,
      );
    }
  }
  return found;
}
