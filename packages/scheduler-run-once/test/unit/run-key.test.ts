/**
 * The run id (`run-key.ts`): stable for one run, distinct for any other. No Firestore.
 * Slot ids are pinned: records written by deployed versions must still be found.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { computeRunId, computeTriggerRunId } from '../../src/core/run-key.ts';

describe('computeRunId', () => {
  const base = {
    jobName: 'a',
    scheduleTime: '2026-10-16T12:00:00Z',
    scope: [] as [string, string][],
  };

  it('is 64 hex characters and the same for the same run', () => {
    assert.match(computeRunId(base), /^[0-9a-f]{64}$/);
    assert.equal(computeRunId(base), computeRunId({ ...base }));
  });

  it('differs when any part differs, including values that contain separators', () => {
    const variants = [
      base,
      { ...base, jobName: 'b' },
      { ...base, scheduleTime: '2026-10-16T12:00:01Z' },
      { ...base, scope: [['config', 'p1']] as [string, string][] },
      { ...base, scope: [['config', 'p1/us']] as [string, string][] },
      {
        ...base,
        scope: [
          ['config', 'p1'],
          ['header:x', 'us'],
        ] as [string, string][],
      },
      { ...base, scope: [['config', 'p1","us']] as [string, string][] },
      {
        ...base,
        scope: [
          ['config', 'p1\\'],
          ['header:x', 'us'],
        ] as [string, string][],
      },
      { ...base, scope: [['header:x', 'p1']] as [string, string][] },
    ];

    const ids = new Set(variants.map((v) => computeRunId(v)));

    assert.equal(ids.size, variants.length);
  });
});

/** The id of slot 2026-10-16T12:00:00Z of `nightly`, unscoped, as deployed versions computed it. */
const PINNED_SLOT_ID =
  '6b39f8f1247835ab02f49cde6539642bcfbad7872dd0b4cfd09a06bc577048f3';

describe('computeRunId of slots (pinned: a deployed version’s records keep their ids)', () => {
  it('is the id every version since v1 computed', () => {
    assert.equal(
      computeRunId({
        jobName: 'nightly',
        scheduleTime: '2026-10-16T12:00:00Z',
        scope: [],
      }),
      PINNED_SLOT_ID,
    );
  });
});

describe('computeTriggerRunId', () => {
  const run = {
    jobName: 'a',
    triggerId: 'trigger-0001',
    scope: [] as [string, string][],
  };

  it('names one run by job, scope and trigger id: the same id for the same three', () => {
    assert.match(computeTriggerRunId(run), /^[0-9a-f]{64}$/);
    assert.equal(computeTriggerRunId(run), computeTriggerRunId({ ...run }));
  });

  it('differs for another job, scope or trigger id, and from every slot and forced run', () => {
    const ids = new Set([
      computeTriggerRunId(run),
      computeTriggerRunId({ ...run, jobName: 'b' }),
      computeTriggerRunId({ ...run, triggerId: 'trigger-0002' }),
      computeTriggerRunId({ ...run, scope: [['header:x-tenant', 'acme']] }),
      computeRunId({ jobName: 'a', scheduleTime: 'trigger-0001', scope: [] }),
      computeRunId({ jobName: 'a', scheduleTime: 'trigger-0001', scope: [] }, [
        'forced',
      ]),
      computeRunId({ jobName: 'a', scheduleTime: 'trigger-0001', scope: [] }, [
        'trigger',
      ]),
    ]);

    assert.equal(ids.size, 7);
  });
});
