/**
 * `npm run runs`'s pure parts (`ops/format-runs.ts`): window durations, readable durations, and the
 * `--check` verdict. No Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  checkFailures,
  humanDuration,
  parseDuration,
  runsJson,
  runsTable,
} from '../../ops/format-runs.ts';
import type { SlotRow } from '../../src/policy/run-history.ts';

describe('parseDuration', () => {
  for (const [text, ms] of [
    ['90m', 5_400_000],
    ['24h', 86_400_000],
    ['30d', 2_592_000_000],
    ['45s', 45_000],
  ] as const) {
    it(`reads ${text} as ${ms} ms`, () => {
      assert.equal(parseDuration(text), ms);
    });
  }
  for (const bad of ['', '24', 'h', '1.5h', '0m', '-5m', '1w', 'yesterday']) {
    it(`refuses ${JSON.stringify(bad)} saying what to write`, () => {
      assert.throws(() => parseDuration(bad), /e\.g\. 90m, 24h, 30d/);
    });
  }
});

describe('humanDuration', () => {
  it('reads at a glance from ms to hours', () => {
    assert.deepEqual([850, 12_340, 245_000, 7_380_000, undefined].map(humanDuration), [
      '850 ms',
      '12.3 s',
      '4 min 5 s',
      '2 h 3 min',
      '',
    ]);
  });
});

describe('checkFailures', () => {
  const row = (state: SlotRow['state'], final: boolean) =>
    ({
      job: 'j',
      slot: new Date(0),
      runId: 'r',
      state,
      final,
      attempts: 0,
      reported: false,
      reruns: 0,
      kind: 'slot',
    }) as SlotRow;

  it('ignores a manual run that failed: --check judges slots', () => {
    const manual = { ...row('failed', true), kind: 'manual' } as SlotRow;

    assert.deepEqual(checkFailures([manual]), []);
  });

  it('ignores missed slots before the oldest slot with a record: the job may not have existed', () => {
    const rows = [
      row('missed', true),
      row('missed', true),
      { ...row('completed', true), attempts: 1 },
    ];

    assert.deepEqual(checkFailures(rows), []);
  });

  it('fails missed and finally failed slots, nothing still in its retry window', () => {
    const rows = [
      { ...row('completed', true), attempts: 1 },
      row('missed', true),
      row('failed', true),
      row('failed', false),
      row('pending', false),
      row('in_progress', false),
    ];

    assert.deepEqual(
      checkFailures(rows).map((r) => r.state),
      ['missed', 'failed'],
    );
  });

  it('shows the missed slots it ignores as before the first record, in the table and the JSON', () => {
    const rows = [
      { ...row('missed', true), slot: new Date('2026-11-30T10:00:00Z') },
      { ...row('completed', true), attempts: 1, slot: new Date('2026-11-30T10:05:00Z') },
      { ...row('missed', true), slot: new Date('2026-11-30T10:10:00Z') },
    ];

    const states = runsTable(rows)
      .split('\n')
      .slice(1)
      .map((line) => line.split(/ {2,}/)[2]);
    const json = JSON.parse(runsJson(rows)) as { state: string; beforeFirstRecord: boolean }[];

    assert.deepEqual(states, ['missed (before first record)', 'completed', 'missed']);
    assert.deepEqual(
      json.map((r) => [r.state, r.beforeFirstRecord]),
      [
        ['missed', true],
        ['completed', false],
        ['missed', false],
      ],
    );
  });

  it('shows every missed slot of a job with no record in the window as before the first record', () => {
    const states = runsTable([row('missed', true), row('missed', true)])
      .split('\n')
      .slice(1)
      .map((line) => line.split(/ {2,}/)[2]);

    assert.deepEqual(states, ['missed (before first record)', 'missed (before first record)']);
    assert.deepEqual(checkFailures([row('missed', true)]), []);
  });
});
