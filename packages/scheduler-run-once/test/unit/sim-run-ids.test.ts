/**
 * The simulator's invariant 47 (`test/sim/run-id-invariants.ts`, `runIdsAsDeployed`) on
 * hand-built executions and records: every run has the id deployed versions compute, every record
 * their key scope. Its ids are written out again from the format, so they are pinned here to the
 * id every version since v1 computed (`test/unit/run-key.test.ts`). No simulation, no Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Scope } from '../../src/core/run-key.ts';
import {
  runIdsAsDeployed,
  v1CheckDocumentId,
  v1KeyScope,
  v1SlotId,
  v1TriggerId,
} from '../sim/run-id-invariants.ts';
import type { Execution, SimOutcome } from '../sim/simulator.ts';
import { execution } from './sim-execution.ts';

/** The id of slot 2026-10-16T12:00:00Z of `nightly`, unscoped, as deployed versions computed it. */
const PINNED_SLOT_ID =
  '6b39f8f1247835ab02f49cde6539642bcfbad7872dd0b4cfd09a06bc577048f3';

const SCOPE: Scope = [['tenant', 'acme']];

/** The check document of `nightly` in {@link SCOPE}, as deployed versions named it. */
const PINNED_CHECK_DOCUMENT = 'nightly~check~ded3b73dbc432110';
const SLOT_AT = Date.parse('2026-10-16T12:00:00Z');
const SLOT_TIME = '2026-10-16T12:00:00Z';

/** An outcome of one deployment with key scope `scope`, these executions and records. */
function outcome(
  executions: Execution[],
  records: [string, Record<string, unknown>][] = [],
  scope: Scope = [],
  foreign: string[] = [],
): SimOutcome {
  return {
    executions,
    records: new Map(records),
    foreignRecords: new Map(foreign.map((id) => [id, {}])),
    deployments: [{ scope: '', keyScope: scope, revisions: [] }],
  } as unknown as SimOutcome;
}

/** A record's schedule time as the memory store holds it. */
const stored = (ms: number) => ({ _seconds: ms / 1000, _nanoseconds: 0 });

describe('invariant 47: runs have the ids deployed versions compute', () => {
  it('computes the pinned id of a deployed version', () => {
    assert.equal(v1SlotId([], 'nightly', SLOT_TIME), PINNED_SLOT_ID);
    assert.equal(v1KeyScope([]), '');
    assert.match(v1KeyScope(SCOPE), /^[0-9a-f]{16}$/);
  });

  it("names a job's check document as deployed versions did", () => {
    assert.equal(v1CheckDocumentId('nightly', []), 'nightly~check');
    assert.equal(v1CheckDocumentId('nightly', SCOPE), PINNED_CHECK_DOCUMENT);
  });

  it('passes each kind of execution under its own id, and records of its scope', () => {
    const slot = v1SlotId(SCOPE, 'nightly', SLOT_TIME);
    const forced = v1SlotId(SCOPE, 'nightly', SLOT_TIME, ['forced']);
    const manual = v1TriggerId(SCOPE, 'nightly', 'trigger-1');
    const rerun = v1TriggerId(SCOPE, 'nightly', 'trigger-2');
    const base = { jobId: 'nightly', scheduleTime: SLOT_AT };
    const runs = [
      execution({ ...base, runId: slot }),
      execution({ ...base, kind: 'forced', runId: forced }),
      execution({
        ...base,
        kind: 'manual',
        runId: manual,
        triggerId: 'trigger-1',
      }),
      execution({
        ...base,
        kind: 'rerun',
        runId: rerun,
        triggerId: 'trigger-2',
        context: { rerunOf: slot } as Execution['context'],
      }),
    ];
    const fields = {
      job_name: 'nightly',
      key_scope: v1KeyScope(SCOPE),
      schedule_time: stored(SLOT_AT),
    };
    const records: [string, Record<string, unknown>][] = [
      [slot, fields],
      [forced, { ...fields, run_kind: 'forced' }],
      [manual, { ...fields, run_kind: 'manual' }],
    ];

    assert.deepEqual(runIdsAsDeployed(outcome(runs, records, SCOPE)), []);
  });

  it('finds a slot run under another id, a forced run under the slot’s, a re-run naming another run', () => {
    const slot = v1SlotId([], 'nightly', SLOT_TIME);
    const base = { jobId: 'nightly', scheduleTime: SLOT_AT };
    const found = runIdsAsDeployed(
      outcome([
        execution({ ...base, runId: 'another-id' }),
        execution({ ...base, kind: 'forced', runId: slot }),
        execution({
          ...base,
          kind: 'rerun',
          runId: v1TriggerId([], 'nightly', 't'),
          triggerId: 't',
          context: { rerunOf: 'another-id' } as Execution['context'],
        }),
      ]),
    );

    assert.equal(found.length, 3, found.join('\n'));
    assert.match(
      found[0] ?? '',
      /slot execution of nightly.* ran as run another-id/,
    );
    assert.match(found[1] ?? '', /forced execution .* ran as run 6b39f8/);
    assert.match(
      found[2] ?? '',
      /re-runs run another-id, not its slot's 6b39f8/,
    );
  });

  it('finds a record of no deployment’s key scope, and a slot’s record under another id', () => {
    const fields = {
      job_name: 'nightly',
      schedule_time: stored(SLOT_AT),
    };
    const found = runIdsAsDeployed(
      outcome(
        [],
        [
          ['scoped-wrongly', { ...fields, key_scope: '' }],
          ['not-the-slot-id', { ...fields, key_scope: v1KeyScope(SCOPE) }],
        ],
        SCOPE,
      ),
    );

    assert.equal(found.length, 2, found.join('\n'));
    assert.match(found[0] ?? '', /record scoped-wrongly names key scope ""/);
    assert.match(
      found[1] ?? '',
      /slot record of nightly@2026-10-16T12:00:00Z has id not-the-slot-id/,
    );
  });

  it('leaves another version’s records, manual runs’ records and fractions of a second alone', () => {
    const found = runIdsAsDeployed(
      outcome(
        [
          execution({
            jobId: 'nightly',
            scheduleTime: SLOT_AT + 500,
            runId: 'x',
          }),
        ],
        [
          ['foreign', { job_name: 'nightly', schedule_time: stored(SLOT_AT) }],
          [
            'manual-run',
            {
              job_name: 'nightly',
              key_scope: '',
              run_kind: 'manual',
              schedule_time: stored(SLOT_AT),
            },
          ],
        ],
        [],
        ['foreign'],
      ),
    );

    assert.deepEqual(found, []);
  });
});
