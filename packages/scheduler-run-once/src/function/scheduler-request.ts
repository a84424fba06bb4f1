/** Reads a Cloud Scheduler delivery's headers. Pure: bad input is refused before Firestore. */
import { RunOnceError } from '../core/errors.ts';
import type { Scope } from '../core/run-key.ts';
import { JOB_ID_RULE, jobIdOf } from '../policy/job-id.ts';
import { canonicalRfc3339, MAX_RFC3339_LENGTH } from '../policy/rfc3339.ts';
import { type ScheduledRun, TRIGGER_MODES } from '../policy/run-plan.ts';
import type { Config } from './config.ts';

/** A delivery whose headers name no scheduled run: 400, nothing written (`core/errors.ts` family). */
export class InvalidRequestError extends RunOnceError {
  override name = 'InvalidRequestError';
}

/** The header Cloud Scheduler sets to the job's id (the Scheduler guide, "deduplicate job requests"). */
export const JOB_NAME_HEADER = 'X-CloudScheduler-JobName';
/** The header Cloud Scheduler sets to the run's schedule time, RFC 3339; sent only for unix-cron schedules. */
export const SCHEDULE_TIME_HEADER = 'X-CloudScheduler-ScheduleTime';

/** Headers of a run by hand (`npm run trigger`): its mode (`TRIGGER_MODES`) and trigger id. */
export const MODE_HEADER = 'X-Run-Once-Mode';
export const TRIGGER_ID_HEADER = 'X-Run-Once-Trigger-Id';
/** `true` on a run by hand that may run beside another run of its job (`--allow-overlap`). */
export const ALLOW_OVERLAP_HEADER = 'X-Run-Once-Allow-Overlap';
/** `true` on a slot delivered by a backfill: a blocked one is answered `waiting`, never `skipped`. */
export const BACKFILL_HEADER = 'X-Run-Once-Backfill';
/**
 * `true` on a slot the run audit delivers itself, Scheduler having not delivered it (the job's
 * `catchUp`): the job sees `ctx.caughtUp`, the record keeps `caught_up_at`.
 */
export const CATCH_UP_HEADER = 'X-Run-Once-Catch-Up';

/** The parts of an HTTP request this module reads (Node's `IncomingMessage` fits). */
export type DeliveryLike = Readonly<{
  rawHeaders: readonly string[];
  url?: string | undefined;
}>;

/** What a scope header's or parameter's value must be, for messages. */
export const SCOPE_VALUE_RULE =
  '1-200 printable ASCII characters without spaces';

/** Whether `value` is a scope value this function accepts ({@link SCOPE_VALUE_RULE}). */
export function isScopeValue(value: string): boolean {
  return /^[\x21-\x7e]{1,200}$/.test(value);
}

/** Every value sent for header `name`, in any case (HTTP/2 lowercases names, HTTP/1.1 does not). */
function headerValues(req: DeliveryLike, name: string): string[] {
  const wanted = name.toLowerCase();
  const raw = req.rawHeaders;
  return raw.filter(
    (_, i) => i % 2 === 1 && raw[i - 1]?.toLowerCase() === wanted,
  );
}

/** The one non-empty value sent of `what`, else an {@link InvalidRequestError} with `hint`. */
function single(values: string[], what: string, hint: string): string {
  const fail = (problem: string) =>
    new InvalidRequestError(`${what} ${problem}`);
  if (values.length === 0) {
    throw fail(`is missing. ${hint}`);
  }
  if (values.length > 1) {
    throw fail(`was sent ${values.length} times; send it exactly once.`);
  }
  const value = values[0] ?? '';
  if (value.trim() === '') {
    throw fail(`is empty. ${hint}`);
  }
  return value;
}

function describe(value: string): string {
  return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);
}

const EXAMPLE_TIME = '2026-10-16T12:00:00Z';

/**
 * The canonical form of a schedule time (`canonicalRfc3339`): `…T05:00:00-07:00` → `…T12:00:00Z`.
 * @throws {InvalidRequestError} for anything that is not an RFC 3339 instant with an offset.
 */
export function normaliseScheduleTime(value: string): string {
  const canonical = canonicalRfc3339(value);
  if (typeof canonical === 'string') {
    return canonical;
  }
  const shown = value.length > MAX_RFC3339_LENGTH ? '' : ` ${describe(value)}`;
  throw new InvalidRequestError(
    `${SCHEDULE_TIME_HEADER}${shown} ${canonical.problem}; use RFC 3339 with an offset, e.g. ${EXAMPLE_TIME}.`,
  );
}

/** A `true` flag header: absent → false; `true` (any case) → true; anything else is refused. */
function flagHeader(req: DeliveryLike, name: string): boolean {
  const values = headerValues(req, name);
  if (values.length === 0) {
    return false;
  }
  const value = single(values, name, 'Send it as "true", or leave it out.');
  if (value.toLowerCase() !== 'true') {
    throw new InvalidRequestError(
      `${name} must be "true" when sent; leave it out otherwise.`,
    );
  }
  return true;
}

/** The trigger headers (both or neither); Allow-Overlap only with them, Backfill only without. */
function readTrigger(
  req: DeliveryLike,
): Pick<ScheduledRun, 'trigger' | 'backfill'> {
  const allowOverlap = flagHeader(req, ALLOW_OVERLAP_HEADER);
  const backfill = flagHeader(req, BACKFILL_HEADER);
  const modes = headerValues(req, MODE_HEADER);
  const ids = headerValues(req, TRIGGER_ID_HEADER);
  if (modes.length === 0 && ids.length === 0) {
    if (allowOverlap) {
      throw new InvalidRequestError(
        `${ALLOW_OVERLAP_HEADER} applies to manual runs and re-runs only (npm run trigger -- JOB --allow-overlap); a slot's run follows the job's overlap policy.`,
      );
    }
    return backfill ? { backfill } : {};
  }
  if (backfill) {
    throw new InvalidRequestError(
      `${BACKFILL_HEADER} marks a slot's delivery by a backfill; a manual run or re-run is not one.`,
    );
  }
  const hint =
    'Run a job by hand with `npm run trigger -- JOB`, which sets both.';
  const mode = single(modes, MODE_HEADER, hint);
  const id = single(ids, TRIGGER_ID_HEADER, hint);
  const known = TRIGGER_MODES.find((m) => m === mode);
  if (known === undefined) {
    throw new InvalidRequestError(
      `${MODE_HEADER} must be ${TRIGGER_MODES.join(' or ')}. ${hint}`,
    );
  }
  if (!/^[A-Za-z0-9_-]{8,64}$/.test(id)) {
    throw new InvalidRequestError(
      `${TRIGGER_ID_HEADER} must be 8-64 letters, digits, "-" or "_" (e.g. a UUID). ${hint}`,
    );
  }
  return {
    trigger: { mode: known, id, ...(allowOverlap ? { allowOverlap } : {}) },
  };
}

type ScopeConfig = Pick<
  Config,
  'keyScope' | 'keyScopeHeaders' | 'keyScopeParams'
>;

/** The value of scope header or query parameter `name` (a lowercase header name); may throw. */
export type ScopeValueOf = (kind: 'header' | 'query', name: string) => string;

/**
 * The run id's scope entries: fixed scope, then headers, then query parameters (the one place that
 * order is decided, for deliveries and `npm run runs`), each configured one's value by `valueFor`.
 */
export function scopeFrom(config: ScopeConfig, valueFor: ScopeValueOf): Scope {
  const fixed =
    config.keyScope === '' ? [] : [['config', config.keyScope] as const];
  const header = (name: string) =>
    [`header:${name}`, valueFor('header', name)] as const;
  const query = (name: string) =>
    [`query:${name}`, valueFor('query', name)] as const;
  return [
    ...fixed,
    ...config.keyScopeHeaders.map(header),
    ...config.keyScopeParams.map(query),
  ];
}

/** A delivery's headers as read: a {@link ScheduledRun} whose schedule time may be missing. */
export type DeliveryHeaders = Omit<
  ScheduledRun,
  'scheduleTime' | 'scheduledAt' | 'withoutScheduleTime'
> & {
  /** Canonical RFC 3339 UTC; `undefined` when `X-CloudScheduler-ScheduleTime` was not sent. */
  readonly scheduleTime: string | undefined;
  /** `scheduleTime` as an instant; `undefined` when it was not sent. */
  readonly scheduledAt: Date | undefined;
};

/** What a delivery without ScheduleTime from a job this function does not run should do instead. */
export function missingScheduleTimeAdvice(jobName: string): string {
  return (
    `${SCHEDULE_TIME_HEADER} is missing, and no job ${describe(jobName)} is declared in this function. ` +
    'Cloud Scheduler sends it for unix-cron schedules only: App Engine-style schedules ("every 5 minutes") send none. ' +
    'Declare the job in src/jobs.ts with a unix-cron schedule such as "*/5 * * * *" (deploy.sh creates its Scheduler job from that), ' +
    'or point this Scheduler job at the function that runs it.'
  );
}

const CATCH_UP_WITHOUT_TIME = `${CATCH_UP_HEADER} marks the run audit's delivery of a slot and needs its ${SCHEDULE_TIME_HEADER}.`;
const CATCH_UP_WITH_MARK = `${CATCH_UP_HEADER} marks the run audit's delivery of a slot; a run by hand or a backfill is not one.`;

const TRIGGER_WITHOUT_TIME = `${SCHEDULE_TIME_HEADER} is missing; a run by hand carries one. Run a job by hand with \`npm run trigger -- JOB\`, which sets it.`;

/**
 * Reads a delivery's job name, schedule time (unsent: the console's "Force run", which the handler
 * decides), scope values and marks (a run by hand's trigger, a backfill's).
 * @throws {InvalidRequestError} saying what to fix in a missing, empty, malformed, oversized or
 *   repeated header or scope parameter (a schedule time may be missing, not on a run by hand).
 */
export function readDeliveryHeaders(
  req: DeliveryLike,
  config: ScopeConfig,
): DeliveryHeaders {
  const nameHint =
    'Call this endpoint from a Cloud Scheduler job, or send the job id in this header.';
  const jobName = single(
    headerValues(req, JOB_NAME_HEADER),
    JOB_NAME_HEADER,
    nameHint,
  );
  if (jobIdOf(jobName) === undefined) {
    throw new InvalidRequestError(
      `${JOB_NAME_HEADER} ${describe(jobName)} is not a job id (${JOB_ID_RULE}) ` +
        'or projects/PROJECT/locations/LOCATION/jobs/ID.',
    );
  }
  const times = headerValues(req, SCHEDULE_TIME_HEADER);
  const hint = `Cloud Scheduler sends it as RFC 3339 UTC, e.g. ${EXAMPLE_TIME}; send it so, or not at all.`;
  const sent =
    times.length === 0 ? undefined : single(times, SCHEDULE_TIME_HEADER, hint);
  const scheduleTime =
    sent === undefined ? undefined : normaliseScheduleTime(sent);
  const scope = scopeFrom(config, sentScopeValue(req));
  const marks = readTrigger(req);
  if (
    (marks.trigger !== undefined || marks.backfill) &&
    scheduleTime === undefined
  ) {
    throw new InvalidRequestError(TRIGGER_WITHOUT_TIME);
  }
  const caughtUp = flagHeader(req, CATCH_UP_HEADER);
  if (caughtUp && scheduleTime === undefined) {
    throw new InvalidRequestError(CATCH_UP_WITHOUT_TIME);
  }
  if (caughtUp && (marks.trigger !== undefined || marks.backfill)) {
    throw new InvalidRequestError(CATCH_UP_WITH_MARK);
  }
  const catchUp = caughtUp ? { caughtUp } : {};
  const scheduledAt =
    scheduleTime === undefined ? undefined : new Date(scheduleTime);
  return {
    jobNameSent: jobName,
    scheduleTime,
    scheduledAt,
    scope,
    ...marks,
    ...catchUp,
  };
}

/** Each scope header's or query parameter's one value as sent. @throws {InvalidRequestError} */
function sentScopeValue(req: DeliveryLike): ScopeValueOf {
  let query: URLSearchParams | undefined;
  return (kind, name) => {
    if (kind === 'query') {
      query ??= new URL(req.url ?? '/', 'http://localhost').searchParams;
      const hint =
        "Add it to the Scheduler job's URL (RUN_KEY_SCOPE_PARAMS requires it).";
      return scopeValue(
        query.getAll(name),
        `Scope query parameter ${name}`,
        hint,
      );
    }
    const hint =
      "Set it in the Scheduler job's HTTP headers (RUN_KEY_SCOPE_HEADERS requires it).";
    return scopeValue(headerValues(req, name), `Scope header ${name}`, hint);
  };
}

function scopeValue(values: string[], what: string, hint: string): string {
  const value = single(values, what, hint);
  if (!isScopeValue(value)) {
    throw new InvalidRequestError(`${what} must be ${SCOPE_VALUE_RULE}.`);
  }
  return value;
}
