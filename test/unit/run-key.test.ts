/**
 * The run id (`run-key.ts`): stable for one run, distinct for any other. No Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { computeRunId } from '../../src/core/run-key.ts';

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
