/**
 * The idempotency key of a run: the Scheduler guide's "hash the job name and schedule time", with
 * a scope and a variant so that forced runs never share their slot's key; a run asked for by hand
 * (a manual run, a re-run) is keyed by its trigger id instead of a time.
 */
import { createHash } from 'node:crypto';

/** Bumped if the encoding ever changes, so old and new keys can never collide. */
const KEY_VERSION = 'scheduler-run/v1';

/**
 * The run id's scope: `[source, value]` pairs in configuration order (`config` for RUN_KEY_SCOPE,
 * `header:NAME`, `query:NAME`), so the same job and slot in two tenants are two runs. Empty by default.
 */
export type Scope = readonly (readonly [string, string])[];

/**
 * What distinguishes a run from its slot's: a forced run (`['forced']`: Scheduler's "Force run"
 * sends the next slot's time). Empty for a slot, whose id is unchanged by this. A run asked for by
 * hand is named by its trigger id instead ({@link computeTriggerRunId}).
 */
export type RunVariant = readonly string[];

/** What names a run: the scope, the short job id and the canonical schedule time. */
export interface RunName {
  readonly scope: Scope;
  /** The short job id (never the full `projects/…/jobs/ID` form: both name one job). */
  readonly jobName: string;
  /** The schedule time in canonical RFC 3339 (`canonicalRfc3339`). */
  readonly scheduleTime: string;
}

/**
 * Computes the run id: SHA-256 (hex, 64 chars) over the scope, the job name and the canonical
 * schedule time, and the variant for runs that are not their slot's. The encoding is the JSON of
 * an array of strings, which is injective: quotes, commas or slashes inside a value are escaped,
 * so no two distinct runs encode to the same bytes. Compute it once per delivery and pass it on
 * (the lesson of Powertools #5715).
 *
 * @returns the run id, also the Firestore document id and the idempotency token for downstream calls.
 * @example computeRunId({ scope: [], jobName: 'nightly', scheduleTime: '2026-10-16T12:00:00Z' })
 */
export function computeRunId(run: RunName, variant: RunVariant = []): string {
  const parts = [KEY_VERSION, run.scope, run.jobName, run.scheduleTime];
  const encoded = JSON.stringify(variant.length === 0 ? parts : [...parts, variant]);
  return createHash('sha256').update(encoded, 'utf8').digest('hex');
}

/** What names a run asked for by hand: the scope, the short job id and the trigger id. */
export interface TriggerName {
  readonly scope: Scope;
  /** The short job id. */
  readonly jobName: string;
  /** `X-Run-Once-Trigger-Id`: 8-64 letters, digits, `-` or `_`. */
  readonly triggerId: string;
}

/**
 * Computes the run id of a manual run or a re-run: SHA-256 (hex) over the scope, the job name and
 * the trigger id, never a schedule time or the mode, so every delivery carrying the trigger id, from
 * any client and whatever time it sends, is that one run. The trigger part is an array where a
 * slot's encoding has its time string, so no trigger id collides with a slot or a forced run.
 *
 * @example computeTriggerRunId({ scope: [], jobName: 'nightly', triggerId: '6f1c…' })
 */
export function computeTriggerRunId(run: TriggerName): string {
  const encoded = JSON.stringify([KEY_VERSION, run.scope, run.jobName, ['trigger', run.triggerId]]);
  return createHash('sha256').update(encoded, 'utf8').digest('hex');
}

/**
 * A short id of a key scope, for the ids of per-job documents and the `key_scope` field of a run
 * record: `''` for the empty scope, else the first 16 hex digits of the SHA-256 of its JSON (the
 * same encoding as the run id's, so two scopes never share one by accident of separators).
 *
 * @example scopeId([]) // ''
 * @example scopeId([['config', 'prod']]) // 16 hex digits
 */
export function scopeId(scope: Scope): string {
  if (scope.length === 0) return '';
  return createHash('sha256').update(JSON.stringify(scope), 'utf8').digest('hex').slice(0, 16);
}
