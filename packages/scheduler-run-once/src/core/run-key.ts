/** The idempotency key of a run: the Scheduler guide's "hash the job name and schedule time". */
import { createHash } from 'node:crypto';

/** Bumped if the encoding ever changes, so old and new keys can never collide. */
const KEY_VERSION = 'scheduler-run/v1';

/**
 * The run id's scope: `[source, value]` pairs in configuration order (`config` for RUN_KEY_SCOPE,
 * `header:NAME`, `query:NAME`), so one job's slot in two tenants is two runs. Empty by default.
 */
export type Scope = readonly (readonly [string, string])[];

/** What distinguishes a run from its slot's: `['forced']` for Scheduler's "Force run"; empty for a slot. */
export type RunVariant = readonly string[];

/** What names a run: the scope, the short job id (never `projects/…/jobs/ID`), the canonical time. */
export interface RunName {
  readonly scope: Scope;
  readonly jobName: string;
  /** The schedule time in canonical RFC 3339 (`canonicalRfc3339`). */
  readonly scheduleTime: string;
}

const sha256 = (parts: unknown) =>
  createHash('sha256').update(JSON.stringify(parts), 'utf8').digest('hex');

/**
 * The run id (the document id and downstream idempotency token): SHA-256 (hex) of the JSON array
 * of the scope, job name, canonical schedule time and variant (if any); JSON of strings is
 * injective, so distinct runs never share an id. Compute it once per delivery and pass it on.
 */
export function computeRunId(run: RunName, variant: RunVariant = []): string {
  const parts = [KEY_VERSION, run.scope, run.jobName, run.scheduleTime];
  return sha256(variant.length === 0 ? parts : [...parts, variant]);
}

/** What names a run asked for by hand: `X-Run-Once-Trigger-Id` (8-64 letters, digits, `-`, `_`). */
export type TriggerName = Omit<RunName, 'scheduleTime'> & {
  readonly triggerId: string;
};

/**
 * The run id of a manual run or a re-run, never from a time or the mode, so every delivery with the
 * trigger id is one run; its trigger part is an array where a slot's has a string, so no slot's id.
 */
export function computeTriggerRunId(run: TriggerName): string {
  return sha256([
    KEY_VERSION,
    run.scope,
    run.jobName,
    ['trigger', run.triggerId],
  ]);
}

/**
 * A short id of a key scope, for the ids of per-job documents and a record's `key_scope`: `''` for
 * the empty scope, else the first 16 hex digits of the SHA-256 of its JSON.
 */
export function scopeId(scope: Scope): string {
  return scope.length === 0 ? '' : sha256(scope).slice(0, 16);
}
