/**
 * Invariant 32: a report's line says what it reports, in the form Error Reporting reads. Each
 * `missed run` and `run failed after retries` ERROR names the job, the slot and the run id of a
 * record of that job's slot, says its state (`missed` or `failed`), carries the Error Reporting
 * fields ("Format a log entry to report error events",
 * https://cloud.google.com/error-reporting/docs/formatting-error-messages: `@type` the
 * `ReportedErrorEvent` type, and without a stack trace a `context.reportLocation` with a file
 * path, a function name and a line number) and the command that acts on it (docs/operations.md:
 * a backfill for a missed slot, a re-run for a failed one). A failing attempt's own report says
 * how many attempts claimed the run and its last error. Alerts, dashboards and the operator act on
 * these lines alone.
 */

import { REPORT_NOT_ACKNOWLEDGED } from '../../src/policy/missed-runs.ts';
import { REPORT_LOG_GRACE_MS } from '../../src/policy/run-history.ts';
import type { LogLine, SimOutcome } from './simulator.ts';

/** The two reports' messages (src/policy/log-messages.ts), as the operator's alerts match them. */
const REPORTS: Readonly<Record<string, 'missed' | 'failed'>> = {
  'missed run': 'missed',
  'run failed after retries': 'failed',
};

/** Error Reporting's event type for a JSON log entry, as its documentation spells it. */
const REPORTED_ERROR_EVENT =
  'type.googleapis.com/google.devtools.clouderrorreporting.v1beta1.ReportedErrorEvent';

/** The flag of the command that acts on each report (`npm run runs … --backfill`, `trigger … --rerun`). */
const FIX_FLAGS = { missed: '--backfill', failed: '--rerun' } as const;

/** What is wrong with a report line's Error Reporting fields, if anything. */
function errorEventProblem(line: LogLine): string | undefined {
  const { fields } = line;
  if (fields['@type'] !== REPORTED_ERROR_EVENT) {
    return `its @type is ${String(fields['@type'])}`;
  }
  const context = fields.context as
    | { reportLocation?: Record<string, unknown> }
    | undefined;
  const location = context?.reportLocation;
  if (
    typeof location?.filePath !== 'string' ||
    location.filePath === '' ||
    typeof location.functionName !== 'string' ||
    location.functionName === '' ||
    typeof location.lineNumber !== 'number'
  ) {
    return `its context.reportLocation is ${JSON.stringify(location)}`;
  }
  return undefined;
}

/** What is wrong with what a report line names (state, job, slot, run, fix), if anything. */
function namingProblem(
  outcome: SimOutcome,
  line: LogLine,
  state: 'missed' | 'failed',
): string | undefined {
  const { fields } = line;
  if (fields.state !== state) {
    return `its state is ${String(fields.state)}`;
  }
  const jobName = String(fields.jobName);
  const slot = String(fields.slot);
  const record = outcome.records.get(String(fields.runId));
  const slotMs = (
    record?.schedule_time as { toMillis?: () => number } | undefined
  )?.toMillis?.();
  if (
    record !== undefined &&
    (record.job_name !== jobName || slotMs !== Date.parse(slot))
  ) {
    return `its run id names ${String(record.job_name)}@${String(slotMs)}, not ${jobName}@${slot}`;
  }
  const fix = String(fields.fix ?? '');
  if (
    !fix.includes(jobName) ||
    !fix.includes(slot) ||
    !fix.includes(FIX_FLAGS[state])
  ) {
    return `its fix is "${fix}"`;
  }
  return undefined;
}

/**
 * What is wrong with a failing attempt's own report (attempts, last error), if anything. Where its
 * release landed and still stands (the run's record names the line's reporter), the line's
 * `lastError` is the one the record keeps: the operator who reads the alert and then the record
 * (`npm run runs`) reads the same error, however long the job's message was.
 */
function attemptReportProblem(
  outcome: SimOutcome,
  line: LogLine,
): string | undefined {
  const { fields } = line;
  if (fields.reportedBy === undefined) {
    return undefined;
  }
  if (fields.reportedBy !== 'attempt') {
    return `its reportedBy is ${String(fields.reportedBy)}`;
  }
  const attempts = fields.attempts;
  if (
    typeof attempts !== 'number' ||
    !Number.isInteger(attempts) ||
    attempts < 1
  ) {
    return `its attempts is ${String(attempts)}`;
  }
  if (typeof fields.lastError !== 'string' || fields.lastError === '') {
    return 'it has no lastError';
  }
  const record = outcome.records.get(String(fields.runId));
  if (
    record !== undefined &&
    fields.reporter !== undefined &&
    record.reported_by === fields.reporter &&
    record.last_error !== fields.lastError
  ) {
    return `its lastError (${fields.lastError.length} characters) is not the record's (${String(record.last_error).length})`;
  }
  return undefined;
}

/** Invariant 32: every report line names what it reports, as Error Reporting reads it. */
export function reportLinesSayWhat(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const line of outcome.logs) {
    const state = REPORTS[line.message];
    if (state === undefined) {
      continue;
    }
    const problem =
      errorEventProblem(line) ??
      namingProblem(outcome, line, state) ??
      attemptReportProblem(outcome, line);
    if (problem !== undefined) {
      found.push(
        `the "${line.message}" line of ${String(line.fields.jobName)}@${String(line.fields.slot)} (${line.instance}, ${new Date(line.at).toISOString()}) says too little: ${problem}`,
      );
    }
  }
  return found;
}

/** The run audit's summary line (src/policy/run-audit.ts), with its counts. */
const AUDIT_DONE = 'run audit done';

/**
 * Answers of an audit request that ran no check: another attempt holds or completed its run, or
 * its claim had no answer from Firestore in time (`unavailable`: the job never started).
 */
const RAN_NO_CHECK = new Set(['in_progress', 'duplicate', 'unavailable']);

/**
 * Since when the lines of the audit request that logged `done` are its own, ms: when the one audit
 * delivery of its slot open on that instance then was sent, or when an earlier one of the slot
 * there ended, if later; `undefined` if none or two were open (their lines would mix).
 */
function auditRequestStart(
  outcome: SimOutcome,
  done: LogLine,
): number | undefined {
  const same = (outcome.auditDeliveries ?? []).filter(
    (d) =>
      d.instance === done.instance &&
      d.scheduleTime === done.fields.scheduleTime &&
      d.sentAt <= done.at,
  );
  const open = same.filter(
    (d) => d.endedAt === undefined || d.endedAt >= done.at,
  );
  const sentAt = open.length === 1 ? open[0]?.sentAt : undefined;
  if (sentAt === undefined) {
    return undefined;
  }
  // An earlier delivery of the slot that ended meanwhile logged its lines before its end; one
  // that never ran the audit's job (a duplicate request, a claim unanswered) checked nothing.
  const earlierEnds = same
    .filter((d) => !RAN_NO_CHECK.has(String(d.outcome)))
    .map((d) => d.endedAt ?? 0)
    .filter((end) => end < done.at);
  return Math.max(sentAt, ...earlierEnds);
}

/**
 * Invariant 36: a run audit's summary counts what it reported. Its `run audit done` line, when no
 * check failed (`failed: 0`), says `reported: N`, and N is the number of report lines its own
 * checks logged (named by `auditRunId`, on its instance, since its request came): the count
 * operators read for "did the audit find anything".
 */
export function auditCountsTrue(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const done of outcome.logs) {
    if (done.message !== AUDIT_DONE || done.fields.failed !== 0) {
      continue;
    }
    const started = auditRequestStart(outcome, done);
    if (started === undefined) {
      continue;
    }
    const auditRunId = done.fields.runId;
    const logged = outcome.logs.filter(
      (line) =>
        REPORTS[line.message] !== undefined &&
        line.fields.auditRunId === auditRunId &&
        line.instance === done.instance &&
        started <= line.at &&
        line.at <= done.at,
    ).length;
    if (done.fields.reported !== logged) {
      found.push(
        `the run audit ${String(auditRunId).slice(0, 12)} (${done.instance}, ${new Date(done.at).toISOString()}) says reported: ${String(done.fields.reported)}, and its checks logged ${logged} reports`,
      );
    }
  }
  return found;
}

/**
 * Whether `line` was logged on `machine`: an instance's lines name it; a final check's name its
 * deployment and machine (`d0-auditor`, `d0-operator`); the operator's check raced by a backfill
 * (`racedCheck`) logs as `d0-check`.
 */
function loggedOn(line: LogLine, machine: string): boolean {
  return machineOf(line) === machine;
}

/** How long a check may take from a report's write to its line, ms: the product's grace for it. */
const REPORT_LINE_DUE_MS = REPORT_LOG_GRACE_MS;

/**
 * Invariant 37: a check logs the report it wrote. Each report a missed-run check's write landed
 * (`reported_at` with its unlogged reporter, `checkReports`) is logged by that check, on its
 * machine, naming its reporter, as its own line (not `relogged`): once the write landed, its line
 * follows whatever its answer was (lost, late, a retry's conflict: the check reads the record to
 * know it as its own, and logs it `unconfirmed` when it cannot read). Only the machine's death, or
 * a pause that outlived the history, beginning before the line was due (`REPORT_LOG_GRACE_MS`
 * after the write, src/policy/run-history.ts) excuse a missing line: a later check would log it
 * again, a check late.
 */
export function checkReportsLogged(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const report of outcome.checkReports ?? []) {
    const due = report.at + REPORT_LINE_DUE_MS;
    const logged = outcome.logs.some(
      (line) =>
        REPORTS[line.message] !== undefined &&
        line.fields.reporter === report.reporter &&
        line.fields.runId === report.runId &&
        line.fields.relogged !== true &&
        loggedOn(line, report.machine) &&
        line.at >= report.at,
    );
    const died = (outcome.deaths ?? []).some(
      (death) =>
        death.instance === report.machine &&
        death.at >= report.at &&
        death.at <= due,
    );
    const paused = (outcome.instancePauses ?? []).some(
      (pause) =>
        pause.instance === report.machine &&
        pause.from <= due &&
        pause.until >= outcome.finalMs,
    );
    if (!logged && !died && !paused) {
      found.push(
        `a missed-run check on ${report.machine} wrote the report of run ${report.runId.slice(0, 12)} (reporter ${report.reporter.slice(0, 8)}, ${new Date(report.at).toISOString()}) and never logged it`,
      );
    }
  }
  return found;
}

/**
 * Invariant 38: a report logged again says what it said first. A `relogged` line (a later check
 * logging a report its writer never marked logged) carries the writer's `reporter`; when the
 * writer's own line exists, the relogged one has its message and state: a failure report logged
 * again stays `run failed after retries` whatever became of the run since (a backfill re-opening
 * it: `--faults --seed=41`).
 */
export function reloggedReportsSayTheSame(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const line of outcome.logs) {
    if (REPORTS[line.message] === undefined || line.fields.relogged !== true) {
      continue;
    }
    const first = outcome.logs.find(
      (other) =>
        REPORTS[other.message] !== undefined &&
        other.fields.relogged !== true &&
        other.fields.runId === line.fields.runId &&
        other.fields.reporter === line.fields.reporter,
    );
    if (first === undefined) {
      continue;
    }
    if (
      first.message !== line.message ||
      first.fields.state !== line.fields.state
    ) {
      found.push(
        `the report of run ${String(line.fields.runId).slice(0, 12)} was logged as "${first.message}" (${String(first.fields.state)}), then again as "${line.message}" (${String(line.fields.state)}) by ${line.instance}`,
      );
    }
  }
  return found;
}

/** The machine whose check logged `line`: an instance's name, or `auditor` / `operator`. */
export function machineOf(line: LogLine): string {
  const check = /^d\d+-(auditor|operator|check)$/.exec(line.instance)?.[1];
  if (check === undefined) {
    return line.instance;
  }
  return check === 'check' ? 'operator' : check;
}

/**
 * Invariant 41: the warning `the report logged above could not be marked logged` is true. A check
 * logs it after a report line it could not mark logged, so a later check may log the report again
 * (invariant 12 allows that second line for it). Something must have kept the mark from landing.
 * The mark is fenced on the check's last write to the run's record before its line (the report,
 * or its claim to log it again), so only what came after that write can refuse it: another write
 * to the record (another check racing for the report, a backfill, on any machine), a fault that met
 * an operation of that check's machine on the record (from the sending of that write: the write
 * itself unanswered leaves the check no update time to fence on), or a pause of the machine. With
 * no write of the machine landed before the line, the window opens the grace before it
 * (`REPORT_LOG_GRACE_MS`). Memory store only (the emulator sees no planted faults).
 */
export function unmarkedWarningsTrue(outcome: SimOutcome): string[] {
  const { troubledOps, recordWrites } = outcome;
  if (troubledOps === undefined || recordWrites === undefined) {
    return [];
  }
  const found: string[] = [];
  for (const warning of outcome.logs) {
    if (warning.message !== REPORT_NOT_ACKNOWLEDGED) {
      continue;
    }
    const runId = String(warning.fields.runId);
    const machine = machineOf(warning);
    const reportAt =
      outcome.logs.findLast(
        (line) =>
          REPORTS[line.message] !== undefined &&
          line.fields.runId === runId &&
          line.instance === warning.instance &&
          line.at <= warning.at,
      )?.at ?? warning.at;
    const ownWrite = recordWrites.findLast(
      (write) =>
        write.runId === runId &&
        write.machine === machine &&
        write.at <= reportAt,
    );
    const from = ownWrite?.at ?? reportAt - REPORT_LOG_GRACE_MS;
    // A write is sent at most a few Firestore timeouts before it lands (a try, a retry).
    const sentFrom = from - WRITE_SENT_WITHIN * outcome.firestoreTimeoutMs;
    const onRecord = (paths: readonly string[]) =>
      paths.some((path) => path.endsWith(`/${runId}`));
    const faulted = troubledOps.some(
      (op) =>
        op.machine === machine &&
        op.at >= sentFrom &&
        op.at <= warning.at &&
        onRecord(op.paths),
    );
    const raced = recordWrites.some(
      (write) =>
        write.runId === runId && write.at > from && write.at <= warning.at,
    );
    const paused = (outcome.instancePauses ?? []).some(
      (pause) =>
        pause.instance === machine &&
        pause.from <= warning.at &&
        pause.until >= from,
    );
    if (!faulted && !raced && !paused) {
      found.push(
        `${warning.instance} warned "${REPORT_NOT_ACKNOWLEDGED}" for run ${runId.slice(0, 12)} at ${new Date(warning.at).toISOString()}, but since its write to the run's record no fault met its operations on it, no write landed on it and the machine was not paused: nothing kept the mark from landing`,
      );
    }
  }
  return found;
}

/** Firestore timeouts within which a write that landed was sent (its tries, with back-off). */
const WRITE_SENT_WITHIN = 4;
