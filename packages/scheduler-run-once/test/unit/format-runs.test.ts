/**
 * `npm run runs`'s pure parts (`src/ops/format-runs.ts`): window durations, readable durations, and the
 * `--check` verdict. No Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  beforeFirstRecordLine,
  checkFailures,
  checkLines,
  humanDuration,
  nextStep,
  parseDuration,
  parseSince,
  runsJson,
  runsTable,
  startedLateText,
} from '../../src/ops/format-runs.ts';
import type { SlotRow } from '../../src/ops/slot-history.ts';

describe('parseSince', () => {
  const now = new Date('2026-12-01T10:00:00Z');

  it('takes a length back from now, or the RFC 3339 time the window starts at, with its offset', () => {
    assert.equal(parseSince('20m', now), 1_200_000);
    assert.equal(parseSince('2026-12-01T09:40:00Z', now), 1_200_000);
    assert.equal(parseSince('2026-12-01T10:40:00+01:00', now), 1_200_000);
  });

  it('refuses a time without its offset, one not before now, or anything else, saying what to write', () => {
    assert.throws(
      () => parseSince('2026-12-01T09:40:00', now),
      /"2026-12-01T09:40:00" has no offset: add Z \(UTC\) or ±hh:mm, e\.g\. 2026-12-01T09:40:00Z/,
    );
    assert.throws(
      () => parseSince('yesterday', now),
      /e\.g\. 90m, 24h, 30d, or an RFC 3339 time .* e\.g\. 2026-12-01T09:40:00Z/,
    );
    assert.throws(
      () => parseSince('2026-12-01T10:00:00Z', now),
      /is not before now \(2026-12-01T10:00:00Z\)/,
    );
    assert.throws(
      () => parseSince('2026-13-01T09:40:00Z', now),
      /is not a valid time/,
    );
  });
});

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
    assert.deepEqual(
      [850, 12_340, 245_000, 7_380_000, undefined].map(humanDuration),
      ['850 ms', '12.3 s', '4 min 5 s', '2 h 3 min', ''],
    );
  });
});

describe('startedLateText', () => {
  it('says how early a forced run came before the slot it carries, never a negative lateness', () => {
    assert.deepEqual(
      [-24_420_000, -2_500, 0, 12_340, undefined].map(startedLateText),
      ['6 h 47 min early', '2.5 s early', '0 ms', '12.3 s', ''],
    );
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

  it('fails a manual run that failed (it has no retries), until a later manual run completed', () => {
    const manual = {
      ...row('failed', true),
      kind: 'manual',
      attempts: 1,
    } as SlotRow;
    const later = {
      ...row('completed', true),
      kind: 'manual',
      attempts: 1,
      slot: new Date(60_000),
    } as SlotRow;

    assert.deepEqual(checkFailures([manual]), [manual]);
    assert.match(
      checkLines([manual])[0] ?? '',
      /manual run failed: npm run trigger -- j$/,
    );
    assert.deepEqual(checkFailures([manual, later]), []);
  });

  it('passes a failed forced run once the manual run its line advises completed (no second run advised)', () => {
    const forced = {
      ...row('failed', true),
      kind: 'forced',
      attempts: 1,
    } as SlotRow;
    const manual = {
      ...row('completed', true),
      kind: 'manual',
      attempts: 1,
      slot: new Date(60_000),
    } as SlotRow;

    assert.match(
      checkLines([forced])[0] ?? '',
      /forced run failed: npm run trigger -- j$/,
    );
    assert.deepEqual(checkFailures([forced, manual]), []);
  });

  it('never fails a paused slot', () => {
    const rows = [
      { ...row('completed', true), attempts: 1 },
      row('paused', true),
    ];

    assert.deepEqual(checkFailures(rows), []);
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
      {
        ...row('completed', true),
        attempts: 1,
        slot: new Date('2026-11-30T10:05:00Z'),
      },
      { ...row('missed', true), slot: new Date('2026-11-30T10:10:00Z') },
    ];

    const states = runsTable(rows)
      .split('\n')
      .slice(1)
      .map((line) => line.split(/ {2,}/)[2]);
    const json = JSON.parse(runsJson(rows)) as {
      state: string;
      beforeFirstRecord: boolean;
    }[];

    assert.deepEqual(states, [
      'not judged (before first record)',
      'completed',
      'missed',
    ]);
    assert.deepEqual(
      json.map((r) => [r.state, r.beforeFirstRecord]),
      [
        ['no_run', true],
        ['completed', false],
        ['missed', false],
      ],
    );
  });

  it('folds the slots before the first record, missed or pending, into one line of the table', () => {
    const minute = (m: number) => new Date(Date.UTC(2026, 10, 30, 10, m));
    const rows = [
      ...Array.from({ length: 46 }, (_, m) => ({
        ...row('pending', false),
        slot: minute(m),
      })),
      { ...row('missed', true), slot: minute(46) },
      { ...row('completed', true), attempts: 1, slot: minute(47) },
    ];

    const lines = runsTable(rows).split('\n').slice(1);

    assert.equal(lines.length, 2);
    assert.deepEqual(lines[0]?.split(/ {2,}/).slice(1, 3), [
      '2026-11-30T10:00:00Z → 2026-11-30T10:46:00Z',
      'not judged (before first record): 47 slots',
    ]);
    assert.deepEqual(checkFailures([row('missed', true)]), []);
  });

  it('shows a paused slot with its note, a forced run taken as its slot, and a slot waiting behind an outstanding one', () => {
    const minute = (m: number) => new Date(Date.UTC(2026, 10, 30, 10, m));
    const rows = [
      {
        ...row('completed', true),
        attempts: 1,
        slot: minute(0),
        startedLateMs: -14_500,
      },
      { ...row('paused', true), slot: minute(1), pauseNote: 'db maintenance' },
      { ...row('failed', false), attempts: 3, slot: minute(2) },
      { ...row('pending', false), slot: minute(3) },
    ];

    const states = runsTable(rows)
      .split('\n')
      .slice(1)
      .map((line) => line.split(/ {2,}/)[2]);
    const json = JSON.parse(runsJson(rows)) as {
      pauseNote: string | null;
      waitingBehind: string | null;
      forcedAsSlot: boolean;
    }[];

    assert.deepEqual(states, [
      'completed (forced run, taken as its slot)',
      'paused (db maintenance)',
      'failed (retrying)',
      'pending (waiting behind 2026-11-30T10:02:00Z)',
    ]);
    assert.deepEqual(
      json.map((r) => [r.forcedAsSlot, r.pauseNote, r.waitingBehind]),
      [
        [true, null, null],
        [false, 'db maintenance', null],
        [false, null, null],
        [false, null, '2026-11-30T10:02:00Z'],
      ],
    );
  });
  it('shows a caught-up slot as such in the table and the JSON', () => {
    const minute = (m: number) => new Date(Date.UTC(2026, 10, 30, 10, m));
    const rows: SlotRow[] = [
      { ...row('completed', true), attempts: 1, slot: minute(0) },
      {
        ...row('completed', true),
        attempts: 1,
        slot: minute(1),
        caughtUpAt: minute(4),
      },
    ];

    const states = runsTable(rows)
      .split('\n')
      .slice(1)
      .map((line) => line.split(/ {2,}/)[2]);
    const json = JSON.parse(runsJson(rows)) as { caughtUpAt: string | null }[];

    assert.deepEqual(states, [
      'completed',
      'completed (caught up at 2026-11-30T10:04:00Z)',
    ]);
    assert.deepEqual(
      json.map((r) => r.caughtUpAt),
      [null, '2026-11-30T10:04:00Z'],
    );
  });

  it('fails an unreadable slot: nobody can tell whether it ran, and the line says how to repair it', () => {
    const unreadable = {
      ...row('unreadable', false),
      lastError: 'status unknown',
    } as SlotRow;

    const failures = checkFailures([
      { ...row('completed', true), attempts: 1 },
      unreadable,
    ]);
    const [line] = checkLines(failures);

    assert.deepEqual(failures, [unreadable]);
    assert.match(
      line ?? '',
      /j 1970-01-01T00:00:00Z unreadable \(status unknown\): repair or delete the document r/,
    );
  });

  it('shows a pending slot before the first record as no run, never pending, in the table and the JSON', () => {
    const rows = [
      { ...row('pending', false), slot: new Date('2026-11-30T10:00:00Z') },
      {
        ...row('completed', true),
        attempts: 1,
        slot: new Date('2026-11-30T10:05:00Z'),
      },
      { ...row('pending', false), slot: new Date('2026-11-30T10:10:00Z') },
    ];

    const states = runsTable(rows)
      .split('\n')
      .slice(1)
      .map((line) => line.split(/ {2,}/)[2]);
    const json = JSON.parse(runsJson(rows)) as { state: string }[];

    assert.deepEqual(states, [
      'not judged (before first record)',
      'completed',
      'pending',
    ]);
    assert.deepEqual(
      json.map((r) => r.state),
      ['no_run', 'completed', 'pending'],
    );
  });

  it('shows every slot of a job with no record one way, missed or pending, with one count and why', () => {
    // An empty ledger: 2 slots past their retry window, 3 inside it; none is judged by the check.
    const minute = (m: number) => new Date(Date.UTC(2026, 10, 30, 10, m));
    const rows = [
      { ...row('missed', true), slot: minute(0) },
      { ...row('missed', true), slot: minute(1) },
      ...[2, 3, 4].map((m) => ({ ...row('pending', false), slot: minute(m) })),
    ];

    const lines = runsTable(rows).split('\n').slice(1);
    const json = JSON.parse(runsJson(rows)) as {
      state: string;
      beforeFirstRecord: boolean;
    }[];

    assert.deepEqual(
      lines.map((line) => line.split(/ {2,}/).slice(1, 3)),
      [
        [
          '2026-11-30T10:00:00Z → 2026-11-30T10:04:00Z',
          'not judged (before first record): 5 slots',
        ],
      ],
    );
    assert.deepEqual(
      json.map((r) => [r.state, r.beforeFirstRecord]),
      rows.map(() => ['no_run', true]),
    );
    assert.match(
      beforeFirstRecordLine(rows) ?? '',
      /^runs: 5 slot\(s\) not judged \(before first record\): the missed-run check never judges a slot before its job's first record/,
    );
  });

  it('marks the rows it is given a mark for (an undeclared id, an old schedule)', () => {
    const old = { ...row('completed', true), attempts: 1 };

    const json = JSON.parse(
      runsJson([old], new Map([[old, 'undeclared']])),
    ) as { mark: string }[];

    assert.match(
      runsTable([old], new Map([[old, 'undeclared']])),
      /completed \(undeclared\)/,
    );
    assert.equal(json[0]?.mark, 'undeclared');
  });
});

describe('nextStep and checkLines: each failure ends with the command that fixes it', () => {
  const at = (
    state: SlotRow['state'],
    final: boolean,
    minute: number,
    kind = 'slot',
  ) =>
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
      [at('missed', true, 42), at('failed', true, 42)].map((row) =>
        nextStep(row),
      ),
      [
        'npm run trigger -- charge-customers --slot 2026-12-01T09:42:00Z',
        'npm run trigger -- charge-customers --slot 2026-12-01T09:42:00Z',
      ],
    );
  });

  it('runs a failed manual run again by hand, and a failed re-run with --rerun', () => {
    assert.deepEqual(
      [at('failed', true, 42, 'manual'), at('failed', true, 42, 'rerun')].map(
        (row) => nextStep(row),
      ),
      [
        'npm run trigger -- charge-customers',
        'npm run trigger -- charge-customers --rerun --slot 2026-12-01T09:42:00Z',
      ],
    );
  });

  it('has nothing to suggest for a slot completed, skipped, paused, still retrying, pending or running', () => {
    const rows = [
      at('completed', true, 0),
      at('skipped', true, 0),
      at('paused', true, 0),
      at('failed', false, 0),
      at('pending', false, 0),
      at('in_progress', false, 0),
    ];

    assert.deepEqual(
      rows.map((row) => nextStep(row)),
      rows.map(() => undefined),
    );
  });

  it('names a deployed function with --url, quoted when the shell needs it', () => {
    assert.equal(
      nextStep(at('missed', true, 42), { url: "https://x.run.app/?a=1&b='2'" }),
      `npm run trigger -- charge-customers --slot 2026-12-01T09:42:00Z --url 'https://x.run.app/?a=1&b='\\''2'\\'''`,
    );
  });

  it('ends each --check line with its command, then offers one backfill for several missed slots', () => {
    const failures = [
      at('missed', true, 40),
      at('failed', true, 45),
      at('missed', true, 50),
    ];

    const lines = checkLines(failures);

    assert.deepEqual(lines, [
      'runs --check: charge-customers 2026-12-01T09:40:00Z missed: npm run trigger -- charge-customers --slot 2026-12-01T09:40:00Z',
      'runs --check: charge-customers 2026-12-01T09:45:00Z failed: npm run trigger -- charge-customers --slot 2026-12-01T09:45:00Z',
      'runs --check: charge-customers 2026-12-01T09:50:00Z missed: npm run trigger -- charge-customers --slot 2026-12-01T09:50:00Z',
      'runs --check: charge-customers: 2 slots missed; to deliver them all, oldest first: npm run runs -- --job charge-customers --since 2026-12-01T09:40:00Z --backfill',
    ]);
  });
});

describe('stored text on a terminal', () => {
  const row = (state: SlotRow['state'], final: boolean) =>
    ({
      job: 'j',
      slot: new Date(0),
      runId: 'r',
      state,
      final,
      attempts: 1,
      kind: 'slot',
    }) as SlotRow;
  const RAW = 'boom\nsecond line\u001b[2J\u001b]0;title\u0007';
  const SHOWN = 'boom\\nsecond line\\u001b[2J\\u001b]0;title\\u0007';

  it('shows a last error with a newline and escape sequences as escapes, on one table line', () => {
    const failed = { ...row('failed', false), lastError: RAW } as SlotRow;

    const table = runsTable([failed]);

    assert.equal(table.split('\n').length, 2, table);
    assert.ok(!table.includes('\u001b'), table);
    assert.ok(table.includes(SHOWN.slice(0, 40)), table);
  });

  it('shows it escaped in the --check lines too', () => {
    const failed = {
      ...row('failed', false),
      kind: 'manual',
      lastError: RAW,
    } as SlotRow;

    const lines = checkLines([failed]);

    assert.equal(lines.length, 1);
    assert.ok(
      !/[\n\r]/.test(lines[0] ?? '') && !(lines[0] ?? '').includes('\u001b'),
      lines[0],
    );
    assert.ok(
      (lines[0] ?? '').includes('boom\\nsecond line\\u001b[2J'),
      lines[0],
    );
  });
});
