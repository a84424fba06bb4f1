/**
 * The run record (`run-record.ts`), in-process: what the converter reads from each document shape,
 * and the claim decision as its named conditions. No Firestore: the converter gets plain data.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type QueryDocumentSnapshot, Timestamp } from '@google-cloud/firestore';
import { noteProblem } from '../../src/core/notes.ts';
import {
  claimDecision,
  runRecordConverter,
  type StoredRecord,
  timestampOf,
} from '../../src/core/run-record.ts';

function read(data: Record<string, unknown>): StoredRecord {
  return runRecordConverter.fromFirestore({
    data: () => data,
  } as unknown as QueryDocumentSnapshot);
}

const NOW = new Date('2026-10-16T12:00:00Z');
const at = (iso: string) => Timestamp.fromDate(new Date(iso));

describe('runRecordConverter', () => {
  it('reads a server-time lease as leased_at + lease_ms', () => {
    const record = read({
      status: 'in_progress',
      attempt_id: 'a',
      leased_at: at('2026-10-16T11:59:50Z'),
      lease_ms: 30_000,
      job_name: 'nightly',
    });

    assert.equal(record.status, 'in_progress');
    assert.equal(
      record.status === 'in_progress' && record.leaseExpires?.toISOString(),
      '2026-10-16T12:00:20.000Z',
    );
    assert.equal(record.status === 'in_progress' && record.jobName, 'nightly');
  });

  it('reads an in-progress record with only a lease_expires field as unreadable, never as lapsed', () => {
    const record = read({
      status: 'in_progress',
      attempt_id: 'a',
      lease_expires: at('2026-10-16T12:05:00Z'),
    });

    assert.equal(record.status, 'unreadable');
  });

  it('reads a failed record with its attempts, failure time and last error', () => {
    const record = read({
      status: 'failed',
      attempt_id: 'a',
      attempts: 2,
      failed_at: at('2026-10-16T12:00:05Z'),
      first_claimed_at: at('2026-10-16T12:00:01Z'),
      last_error: 'billing answered 503',
    });

    assert.equal(record.status, 'failed');
    assert.equal(record.status === 'failed' && record.attempts, 2);
    assert.equal(
      record.status === 'failed' && record.lastError,
      'billing answered 503',
    );
    assert.equal(
      record.status === 'failed' && record.firstClaimedAt?.toISOString(),
      '2026-10-16T12:00:01.000Z',
    );
  });

  it('counts one attempt on records of the version before attempts were kept', () => {
    const record = read({ status: 'completed', attempt_id: 'a' });

    assert.equal(record.status === 'completed' && record.attempts, 1);
  });

  it('reads a completed record even without attempt_id or lease', () => {
    const record = read({
      status: 'completed',
      completed_at: at('2026-10-16T12:01:00Z'),
    });

    assert.equal(record.status, 'completed');
    assert.equal(
      record.status === 'completed' && record.completedAt?.toISOString(),
      '2026-10-16T12:01:00.000Z',
    );
  });

  const unreadable: [string, Record<string, unknown>, string, RegExp][] = [
    ['a numeric status', { status: 1 }, 'status', /is 1, not a known status/],
    ['a missing status', {}, 'status', /is missing, not a known status/],
    [
      'an upper-case status',
      { status: 'COMPLETED' },
      'status',
      /"COMPLETED", not a known/,
    ],
    [
      'no attempt_id',
      { status: 'in_progress', lease_expires: at('2026-10-16T12:05:00Z') },
      'attempt_id',
      /missing/,
    ],
    [
      'no lease at all',
      { status: 'in_progress', attempt_id: 'a' },
      'leased_at',
      /missing or not a timestamp/,
    ],
    [
      'a lease_expires field instead of leased_at and lease_ms',
      {
        status: 'in_progress',
        attempt_id: 'a',
        lease_expires: at('2026-10-16T12:05:00Z'),
      },
      'leased_at',
      /missing or not a timestamp/,
    ],
    [
      'leased_at without lease_ms',
      {
        status: 'in_progress',
        attempt_id: 'a',
        leased_at: at('2026-10-16T12:00:00Z'),
      },
      'lease_ms',
      /positive whole number/,
    ],
    [
      'lease_ms as a string',
      {
        status: 'in_progress',
        attempt_id: 'a',
        leased_at: at('2026-10-16T12:00:00Z'),
        lease_ms: '300',
      },
      'lease_ms',
      /positive whole number/,
    ],
    [
      'lease_ms of zero',
      {
        status: 'in_progress',
        attempt_id: 'a',
        leased_at: at('2026-10-16T12:00:00Z'),
        lease_ms: 0,
      },
      'lease_ms',
      /positive whole number/,
    ],
    ...[1e300, 86_400_001, 1.5, Number.MAX_SAFE_INTEGER + 2].map(
      (leaseMs): [string, Record<string, unknown>, string, RegExp] => [
        `lease_ms of ${leaseMs} (never written: above a day, or not whole)`,
        {
          status: 'in_progress',
          attempt_id: 'a',
          leased_at: at('2026-10-16T11:00:00Z'),
          lease_ms: leaseMs,
        },
        'lease_ms',
        /positive whole number of ms up to 86400000/,
      ],
    ),
    ...[-1, 1.5, 'two', 2 ** 60].map(
      (attempts): [string, Record<string, unknown>, string, RegExp] => [
        `attempts of ${String(attempts)}`,
        { status: 'completed', attempt_id: 'a', attempts },
        'attempts',
        /not a whole number/,
      ],
    ),
    [
      'lease_ms without leased_at',
      { status: 'in_progress', attempt_id: 'a', lease_ms: 300 },
      'leased_at',
      /not a timestamp/,
    ],
  ];
  for (const [what, data, field, problem] of unreadable) {
    it(`calls ${what} unreadable, naming ${field}`, () => {
      const record = read(data);

      assert.equal(record.status, 'unreadable');
      assert.equal(record.status === 'unreadable' && record.field, field);
      assert.match(
        record.status === 'unreadable' ? record.problem : '',
        problem,
      );
    });
  }

  it('refuses to write through the converter: writes use the builders and server timestamps', () => {
    assert.throws(
      () => runRecordConverter.toFirestore({} as never),
      /builders of record-writes.ts/,
    );
  });
});

describe('claimDecision', () => {
  const lease = (iso: string) =>
    read({
      status: 'in_progress',
      attempt_id: 'a',
      leased_at: at(iso),
      lease_ms: 1,
    });
  const cases: [string, StoredRecord | undefined, string, string?][] = [
    ['no record', undefined, 'absent'],
    [
      'a completed record',
      read({ status: 'completed', attempt_id: 'a' }),
      'completed',
    ],
    [
      'a lease ending after now',
      lease('2026-10-16T12:00:00.000Z'),
      'lease_live',
    ],
    [
      'a lease ending exactly now',
      lease('2026-10-16T11:59:59.999Z'),
      'take_over',
    ],
    ['a lease ended before now', lease('2026-10-16T11:00:00Z'), 'take_over'],
    ['an unreadable record', read({ status: 42 }), 'unreadable'],
    [
      'a failed attempt',
      read({ status: 'failed', attempt_id: 'a', attempts: 1 }),
      'take_over',
    ],
    ['a reported miss', read({ status: 'missed', attempts: 0 }), 'take_over'],
    [
      'a lease whose leased_at is later than Firestore’s now by more than the longest lease',
      read({
        status: 'in_progress',
        attempt_id: 'a',
        leased_at: at('2026-10-18T12:00:00Z'),
        lease_ms: 1000,
      }),
      'unreadable',
    ],
  ];
  for (const [what, record, decision] of cases) {
    it(`decides ${decision} for ${what}`, () => {
      const decided = claimDecision(record, NOW);

      assert.equal(decided.decision, decision);
      if (decided.decision !== 'absent' && decided.decision !== 'unreadable') {
        assert.equal(decided.record, record);
      }
    });
  }
});

describe('timestampOf', () => {
  it('keeps nanoseconds that a Date would drop', () => {
    const ts = timestampOf('2026-10-16T12:00:00.123456789Z');

    assert.equal(ts.seconds, Date.parse('2026-10-16T12:00:00Z') / 1000);
    assert.equal(ts.nanoseconds, 123_456_789);
  });
});

describe('noteProblem: plain data only, refused at once with a message naming the note', () => {
  class Execution {
    name = 'exec-1';
  }
  const refused: [string, string, unknown, RegExp][] = [
    [
      'a name that is a prototype member',
      'constructor',
      'x',
      /"constructor" is a member of every object's prototype/,
    ],
    ['the name toString', 'toString', 1, /"toString" is a member/],
    ['a Map', 'launch', new Map([['a', 1]]), /note launch is a Map object/],
    [
      'a Date',
      'launch',
      new Date(0),
      /note launch is a Date object.*toISOString/,
    ],
    [
      'a class instance',
      'launch',
      new Execution(),
      /note launch is a Execution object/,
    ],
    ['an array', 'launch', ['a'], /note launch is an array/],
    [
      'a field named constructor',
      'launch',
      { constructor: 'x' },
      /field "constructor" of note launch is a member/,
    ],
    [
      'a field named __proto__',
      'launch',
      JSON.parse('{"__proto__": "x"}'),
      /field "__proto__" of note launch/,
    ],
    [
      'a symbol key',
      'launch',
      { [Symbol('s')]: 1 },
      /note launch is an object with a symbol or non-enumerable key/,
    ],
    [
      'a non-enumerable field',
      'launch',
      Object.defineProperty({ a: 1 }, 'b', { value: 2 }),
      /note launch is an object with a symbol or non-enumerable key/,
    ],
    [
      'a nested Date',
      'launch',
      { at: new Date(0) },
      /field at of note launch: a value must be a string/,
    ],
    [
      'a non-finite number',
      'count',
      Number.NaN,
      /note count: a number must be finite/,
    ],
  ];
  for (const [what, name, value, message] of refused) {
    it(`refuses ${what}`, () => {
      assert.match(noteProblem(name, value) ?? 'accepted', message);
    });
  }

  it('accepts scalars, plain objects and objects without a prototype', () => {
    const bare = Object.assign(Object.create(null), { name: 'exec-1' });

    assert.equal(
      noteProblem('launch', { name: 'exec-1', attempt: 2, done: false }),
      undefined,
    );
    assert.equal(noteProblem('launch', bare), undefined);
    assert.equal(noteProblem('count', 3), undefined);
  });
});
