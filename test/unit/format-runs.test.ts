/**
 * `npm run runs`'s pure parts (`ops/format-runs.ts`): window durations, readable durations, and the
 * `--check` verdict. No Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  checkFailures,
  checkLines,
  humanDuration,
  nextStep,
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
      rerunOf: undefined,
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
  it('fails an unreadable slot: nobody can tell whether it ran, and the line says how to repair it', () => {
    const unreadable = { ...row('unreadable', false), lastError: 'status unknown' } as SlotRow;

    const failures = checkFailures([{ ...row('completed', true), attempts: 1 }, unreadable]);
    const [line] = checkLines(failures, new Date(0));

    assert.deepEqual(failures, [unreadable]);
    assert.match(
      line ?? '',
      /j 1970-01-01T00:00:00Z unreadable \(status unknown\): repair or delete the document r/,
    );
  });

  it('shows a pending slot before the first record as no run, never pending, in the table and the JSON', () => {
    const rows = [
      { ...row('pending', false), slot: new Date('2026-11-30T10:00:00Z') },
      { ...row('completed', true), attempts: 1, slot: new Date('2026-11-30T10:05:00Z') },
      { ...row('pending', false), slot: new Date('2026-11-30T10:10:00Z') },
    ];

    const states = runsTable(rows)
      .split('\n')
      .slice(1)
      .map((line) => line.split(/ {2,}/)[2]);
    const json = JSON.parse(runsJson(rows)) as { state: string }[];

    assert.deepEqual(states, ['no run (before first record)', 'completed', 'pending']);
    assert.deepEqual(
      json.map((r) => r.state),
      ['no_run', 'completed', 'pending'],
    );
  });

  it('keeps pending a slot of a job with no record yet: its first delivery may be on its way', () => {
    const states = runsTable([row('pending', false)])
      .split('\n')
      .slice(1)
      .map((line) => line.split(/ {2,}/)[2]);

    assert.deepEqual(states, ['pending']);
  });

  it('marks the rows it is given a mark for (an undeclared id, an old schedule)', () => {
    const old = { ...row('completed', true), attempts: 1 };

    const json = JSON.parse(runsJson([old], new Map([[old, 'undeclared']]))) as { mark: string }[];

    assert.match(runsTable([old], new Map([[old, 'undeclared']])), /completed \(undeclared\)/);
    assert.equal(json[0]?.mark, 'undeclared');
  });
});

describe('nextStep and checkLines: each failure ends with the command that fixes it', () => {
  const at = (state: SlotRow['state'], final: boolean, minute: number, kind = 'slot') =>
    ({
      job: 'charge-customers',
      slot: new Date(Date.UTC(2026, 11, 1, 9, minute)),
      runId: 'r',
      state,
      final,
      attempts: state === 'missed' ? 0 : 1,
      reported: false,
      rerunOf: undefined,
      notes: {},
      kind,
    }) as SlotRow;

  it('delivers a missed or finally failed slot again as Scheduler would, with --slot', () => {
    assert.deepEqual(
      [at('missed', true, 42), at('failed', true, 42)].map((row) => nextStep(row)),
      [
        'npm run trigger -- charge-customers --slot 2026-12-01T09:42:00Z',
        'npm run trigger -- charge-customers --slot 2026-12-01T09:42:00Z',
      ],
    );
  });

  it('re-runs a completed slot only on purpose, with --rerun', () => {
    assert.equal(
      nextStep(at('completed', true, 42)),
      'npm run trigger -- charge-customers --rerun --slot 2026-12-01T09:42:00Z',
    );
  });

  it('has nothing to suggest for a slot still retrying, pending or running, or a manual run', () => {
    const rows = [
      at('failed', false, 0),
      at('pending', false, 0),
      at('in_progress', false, 0),
      at('failed', true, 0, 'manual'),
    ];

    assert.deepEqual(
      rows.map((row) => nextStep(row)),
      [undefined, undefined, undefined, undefined],
    );
  });

  it('names a deployed function with --url, quoted when the shell needs it', () => {
    assert.equal(
      nextStep(at('missed', true, 42), { url: "https://x.run.app/?a=1&b='2'" }),
      `npm run trigger -- charge-customers --slot 2026-12-01T09:42:00Z --url 'https://x.run.app/?a=1&b='\\''2'\\'''`,
    );
  });

  it('ends each --check line with its command, then offers one backfill for several missed slots', () => {
    const failures = [at('missed', true, 40), at('failed', true, 45), at('missed', true, 50)];

    const lines = checkLines(failures, new Date(Date.UTC(2026, 11, 1, 10, 0, 30)));

    assert.deepEqual(lines, [
      'runs --check: charge-customers 2026-12-01T09:40:00Z missed: npm run trigger -- charge-customers --slot 2026-12-01T09:40:00Z',
      'runs --check: charge-customers 2026-12-01T09:45:00Z failed: npm run trigger -- charge-customers --slot 2026-12-01T09:45:00Z',
      'runs --check: charge-customers 2026-12-01T09:50:00Z missed: npm run trigger -- charge-customers --slot 2026-12-01T09:50:00Z',
      'runs --check: charge-customers: 2 slots missed; to deliver them all, oldest first: npm run runs -- --job charge-customers --since 22m --backfill',
    ]);
  });
});
