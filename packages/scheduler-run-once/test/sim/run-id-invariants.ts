/**
 * Invariant 47: every run has the id that deployed versions compute, and every record the key
 * scope they compute (docs/how-it-works.md, the table's `key` row). A record is found by its id alone: a
 * version that named a slot's run otherwise than the version before it would not find that
 * version's record during a rolling deploy, and the slot would run twice; the run audit would not
 * find the slot's record either, and report a slot that ran as missed.
 *
 * The ids are recomputed here from what the simulator sent and the records hold, by the format
 * version 1 fixed (`KEY_VERSION` `scheduler-run/v1`), written out again rather than imported:
 * `test/unit/sim-run-ids.test.ts` pins it to the id every version since v1 computed. So a change
 * of `src/core/run-key.ts` that changes an id breaks this invariant, whether or not the product
 * still runs each slot once with its new ids:
 *
 * - each execution ran under the id of its kind: a slot's (and a caught-up slot's) from its key
 *   scope, job and schedule time; a forced run's with the variant `['forced']`; a manual run's and
 *   a re-run's from its trigger id; a re-run names its slot's run (`rerunOf`) by the slot's id;
 * - each run record this version wrote (not another version's: `foreign_record`) names the key
 *   scope of a deployment (`key_scope`: the first 16 hex digits of the scope's hash, `''` for none),
 *   and a slot's or forced run's record has the id its job, slot and kind give.
 *
 * Schedule times with a fraction of a second are left out (their canonical form keeps the digits
 * as sent, which a record's timestamp does not hold); the simulator sends none.
 */
import { createHash } from 'node:crypto';
import type { Scope } from '../../src/core/run-key.ts';
import type { Execution, SimOutcome } from './simulator.ts';

/** The run-id format's version, part of every id since the first release. */
const KEY_VERSION = 'scheduler-run/v1';

/** How many hex digits of the scope's hash a record's `key_scope` keeps. */
const KEY_SCOPE_DIGITS = 16;

/** The variant that makes a forced run's id ("Force run" without the slot's own delivery). */
const FORCED_VARIANT = ['forced'];

/** The SHA-256, in hex, of `parts` as JSON: every id's hash in format v1. */
function v1Hash(parts: unknown): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex');
}

/** A slot's run id in format v1; with `variant` (non-empty), a variant of the slot's run. */
export function v1SlotId(
  scope: Scope,
  jobId: string,
  scheduleTime: string,
  variant: readonly string[] = [],
): string {
  const parts = [KEY_VERSION, scope, jobId, scheduleTime];
  return v1Hash(variant.length === 0 ? parts : [...parts, variant]);
}

/** A manual run's or re-run's id in format v1: its job's, under its trigger id. */
export function v1TriggerId(
  scope: Scope,
  jobId: string,
  triggerId: string,
): string {
  return v1Hash([KEY_VERSION, scope, jobId, ['trigger', triggerId]]);
}

/** A record's `key_scope` in format v1: `''` for no scope. */
export function v1KeyScope(scope: Scope): string {
  return scope.length === 0 ? '' : v1Hash(scope).slice(0, KEY_SCOPE_DIGITS);
}

/**
 * A job's check document id (its missed-run cursor and its pauses, per key scope) as deployed
 * versions name it: `{jobId}~check`, and `~` and the scope's {@link v1KeyScope} for a non-empty
 * scope. A version that named it otherwise would not read the cursor and pauses the last one left:
 * during a rolling deploy its check would start over a day back, and a job paused by the operator
 * would run.
 */
export function v1CheckDocumentId(jobId: string, scope: Scope): string {
  const keyScope = v1KeyScope(scope);
  return keyScope === '' ? `${jobId}~check` : `${jobId}~check~${keyScope}`;
}

/** An instant as a schedule time's canonical form (whole seconds, `Z`); undefined with a fraction. */
function canonicalTime(ms: number): string | undefined {
  if (ms % 1000 !== 0) {
    return undefined;
  }
  return new Date(ms).toISOString().replace('.000Z', 'Z');
}

/** A record's timestamp field (`{ _seconds, _nanoseconds }` in the memory store), ms. */
function timestampMs(value: unknown): number | undefined {
  if (value === null || typeof value !== 'object') {
    return undefined;
  }
  const { _seconds: seconds, _nanoseconds: nanos } = value as {
    _seconds?: unknown;
    _nanoseconds?: unknown;
  };
  if (typeof seconds !== 'number' || nanos !== 0) {
    return undefined;
  }
  return seconds * 1000;
}

/** Invariant 47 over every execution and every record this version wrote. */
export function runIdsAsDeployed(outcome: SimOutcome): string[] {
  return [...executionIds(outcome), ...recordIds(outcome)];
}

/** The id each execution should have run under; undefined where the simulator cannot tell. */
function expectedId(outcome: SimOutcome, e: Execution): string | undefined {
  const scope = outcome.deployments[e.deployment]?.keyScope ?? [];
  if (e.kind === 'manual' || e.kind === 'rerun') {
    return e.triggerId === undefined
      ? undefined
      : v1TriggerId(scope, e.jobId, e.triggerId);
  }
  const time = canonicalTime(e.scheduleTime);
  if (time === undefined) {
    return undefined;
  }
  const variant = e.kind === 'forced' ? FORCED_VARIANT : [];
  return v1SlotId(scope, e.jobId, time, variant);
}

/** Each execution ran under the id of its kind, and a re-run names its slot's run by its id. */
function executionIds(outcome: SimOutcome): string[] {
  const found: string[] = [];
  for (const e of outcome.executions) {
    const named = `the ${e.kind} execution of ${e.jobId}@${new Date(e.scheduleTime).toISOString()} on ${e.instance}`;
    const expected = expectedId(outcome, e);
    if (expected !== undefined && e.runId !== expected) {
      found.push(
        `invariant 47: ${named} ran as run ${e.runId}, not ${expected}, the id deployed versions give it`,
      );
    }
    const slotTime = canonicalTime(e.scheduleTime);
    if (e.kind === 'rerun' && slotTime !== undefined) {
      const scope = outcome.deployments[e.deployment]?.keyScope ?? [];
      const slotId = v1SlotId(scope, e.jobId, slotTime);
      if (e.context?.rerunOf !== slotId) {
        found.push(
          `invariant 47: ${named} re-runs run ${String(e.context?.rerunOf)}, not its slot's ${slotId}`,
        );
      }
    }
  }
  return found;
}

/** Each record this version wrote names a deployment's key scope; a slot's or forced run's its id. */
function recordIds(outcome: SimOutcome): string[] {
  const scopes = new Map<string, Scope>(
    outcome.deployments.map((d) => [v1KeyScope(d.keyScope), d.keyScope]),
  );
  const found: string[] = [];
  // Outcomes made by hand for other invariants' tests may hold no records.
  for (const [runId, record] of outcome.records ?? []) {
    if (outcome.foreignRecords?.has(runId) === true) {
      continue;
    }
    const keyScope = record.key_scope;
    const scope =
      typeof keyScope === 'string' ? scopes.get(keyScope) : undefined;
    if (scope === undefined) {
      found.push(
        `invariant 47: record ${runId} names key scope ${JSON.stringify(keyScope)}, no deployment's (${[...scopes.keys()].map((s) => JSON.stringify(s)).join(', ')})`,
      );
      continue;
    }
    const kind = record.run_kind ?? 'slot';
    const at = timestampMs(record.schedule_time);
    const time = at === undefined ? undefined : canonicalTime(at);
    if (
      (kind !== 'slot' && kind !== 'forced') ||
      time === undefined ||
      typeof record.job_name !== 'string'
    ) {
      continue;
    }
    const variant = kind === 'forced' ? FORCED_VARIANT : [];
    const expected = v1SlotId(scope, record.job_name, time, variant);
    if (runId !== expected) {
      found.push(
        `invariant 47: the ${kind} record of ${record.job_name}@${time} has id ${runId}, not ${expected}, the id deployed versions give it`,
      );
    }
  }
  return found;
}
