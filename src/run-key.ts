/**
 * The idempotency key of a scheduled run.
 */
import { createHash } from 'node:crypto';
import type { ScheduledRun } from './scheduler-request.ts';

/** Bumped if the encoding ever changes, so old and new keys can never collide. */
const KEY_VERSION = 'scheduler-run/v1';

/**
 * What distinguishes a run from its slot's: a forced run (`['forced']`: Scheduler's "Force run"
 * sends the next slot's time) or a manual run (`['manual', triggerId]`). Empty for a slot, whose id
 * is unchanged by this.
 */
export type RunVariant = readonly string[];

/**
 * Computes the run id: SHA-256 (hex, 64 chars) over the scope, the job name and the normalised
 * schedule time, and the variant for runs that are not their slot's. The encoding is the JSON of an array of strings, which is injective: quotes,
 * commas or slashes inside a value are escaped, so no two distinct runs encode to the same bytes.
 * Compute it once per delivery and pass it on (the lesson of Powertools #5715).
 *
 * @param run - the run as read from the delivery; `scheduleTime` must already be normalised.
 * @returns the run id, also the Firestore document id and the idempotency token for downstream calls.
 */
export function computeRunId(
  run: Pick<ScheduledRun, 'scope' | 'jobName' | 'scheduleTime'>,
  variant: RunVariant = [],
): string {
  const parts = [KEY_VERSION, run.scope, run.jobName, run.scheduleTime];
  const encoded = JSON.stringify(variant.length === 0 ? parts : [...parts, variant]);
  return createHash('sha256').update(encoded, 'utf8').digest('hex');
}
