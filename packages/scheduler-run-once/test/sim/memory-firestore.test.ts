/**
 * The in-memory Firestore against the real emulator: the same generated sequences of the
 * operations the product calls (create, update with and without a `lastUpdateTime` precondition,
 * set, delete, get, getAll, batched writes; dotted field paths, server timestamps, deletes, µs
 * timestamps) give the same results, the same error codes and the same order of update times on
 * both. A failure shrinks to the shortest sequence and prints its seed.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import {
  type DocumentData,
  FieldValue,
  Firestore,
  Timestamp,
} from '@google-cloud/firestore';
import fc from 'fast-check';
import {
  asFirestore,
  MemoryFirestore,
} from '../../src/testing/memory-firestore.ts';

if (!process.env.FIRESTORE_EMULATOR_HOST) {
  throw new Error(
    'Run the tests through `npm test`, or one file with `npm run test:file -- FILE`: both start the Firestore emulator.',
  );
}

const emulator = new Firestore({
  projectId: process.env.GOOGLE_CLOUD_PROJECT ?? 'demo-scheduler-run-once',
});

const IDS = ['a', 'b', 'c'] as const;
type Id = (typeof IDS)[number];

/** A field value: plain, a client timestamp with nanoseconds, or a sentinel. */
type Value =
  | { t: 'str'; v: string }
  | { t: 'num'; v: number }
  | { t: 'ts'; s: number; n: number }
  | { t: 'now' }
  | { t: 'del' }
  | { t: 'map'; v: string }
  /** `undefined`, and a map with an `undefined` property: for `ignoreUndefinedProperties`. */
  | { t: 'undef' }
  | { t: 'mapUndef'; v: string };

type Fields = [string, Value][];
type Precondition = 'none' | 'last' | 'stale';
type Op =
  | { op: 'get'; id: Id }
  | { op: 'getAll'; ids: Id[] }
  | { op: 'create'; id: Id; fields: Fields }
  | { op: 'set'; id: Id; fields: Fields }
  | { op: 'update'; id: Id; fields: Fields; pre: Precondition }
  | { op: 'delete'; id: Id }
  | {
      op: 'batch';
      writes: (
        | { op: 'create'; id: Id; fields: Fields }
        | { op: 'update'; id: Id; fields: Fields; pre: Precondition }
      )[];
    };

const id = fc.constantFrom(...IDS);
const plainValue: fc.Arbitrary<Value> = fc.oneof(
  fc.record({
    t: fc.constant('str' as const),
    v: fc.constantFrom('in_progress', 'completed', 'x'),
  }),
  fc.record({
    t: fc.constant('num' as const),
    v: fc.integer({ min: 0, max: 3 }),
  }),
  fc.record({
    t: fc.constant('ts' as const),
    s: fc.integer({ min: 1_700_000_000, max: 1_700_000_100 }),
    n: fc.integer({ min: 0, max: 999_999_999 }),
  }),
  fc.constant({ t: 'now' as const }),
  fc.record({ t: fc.constant('map' as const), v: fc.constantFrom('p', 'q') }),
);
/** Sequences of operations whose field values are drawn from `value`. */
function operations(value: fc.Arbitrary<Value>): fc.Arbitrary<Op[]> {
  const topFields = fc.uniqueArray(
    fc.tuple(
      fc.constantFrom('status', 'attempts', 'leased_at', 'notes'),
      value,
    ),
    { minLength: 1, maxLength: 3, selector: ([k]) => k },
  );
  const updateFields = fc
    .uniqueArray(
      fc.tuple(
        fc.constantFrom(
          'status',
          'attempts',
          'leased_at',
          'notes',
          'notes.x',
          'notes.y',
        ),
        fc.oneof(
          { weight: 4, arbitrary: value },
          { weight: 1, arbitrary: fc.constant({ t: 'del' as const }) },
        ),
      ),
      { minLength: 1, maxLength: 3, selector: ([k]) => k },
    )
    .filter((fs) => {
      // Firestore refuses a path and its own parent in one update: so does the generator.
      const keys = fs.map(([k]) => k);
      return !(
        keys.includes('notes') && keys.some((k) => k.startsWith('notes.'))
      );
    });
  const pre = fc.constantFrom<Precondition>('none', 'last', 'last', 'stale');
  const createOp = fc.record({
    op: fc.constant('create' as const),
    id,
    fields: topFields,
  });
  const updateOp = fc.record({
    op: fc.constant('update' as const),
    id,
    fields: updateFields,
    pre,
  });
  return fc.array(
    fc.oneof(
      fc.record({ op: fc.constant('get' as const), id }),
      fc.record({
        op: fc.constant('getAll' as const),
        ids: fc.uniqueArray(id, { minLength: 1, maxLength: 3 }),
      }),
      { weight: 3, arbitrary: createOp },
      fc.record({ op: fc.constant('set' as const), id, fields: topFields }),
      { weight: 4, arbitrary: updateOp },
      fc.record({ op: fc.constant('delete' as const), id }),
      fc.record({
        op: fc.constant('batch' as const),
        writes: fc.uniqueArray(fc.oneof(createOp, updateOp), {
          minLength: 1,
          maxLength: 3,
          selector: (w) => w.id,
        }),
      }),
    ),
    { minLength: 1, maxLength: 14 },
  );
}

const ops = operations(plainValue);

/** Values with `undefined` among them (top-level and as a map's property). */
const undefinedValues: fc.Arbitrary<Value> = fc.oneof(
  plainValue,
  fc.constant({ t: 'undef' as const }),
  fc.record({
    t: fc.constant('mapUndef' as const),
    v: fc.constantFrom('p', 'q'),
  }),
);

function fieldValue(v: Value): unknown {
  switch (v.t) {
    case 'str':
    case 'num':
      return v.v;
    case 'ts':
      return new Timestamp(v.s, v.n);
    case 'now':
      return FieldValue.serverTimestamp();
    case 'del':
      return FieldValue.delete();
    case 'map':
      return { [v.v]: 1, at: FieldValue.serverTimestamp() };
    case 'undef':
      return undefined;
    case 'mapUndef':
      return { [v.v]: 1, gone: undefined };
  }
}

function dataOf(fields: Fields): DocumentData {
  return Object.fromEntries(fields.map(([k, v]) => [k, fieldValue(v)]));
}

/** What one operation gave, with every server time replaced by its rank among all seen. */
type Outcome = unknown;

interface Db {
  collection(path: string): {
    doc(id: string): FirebaseFirestore.DocumentReference;
  };
  getAll(
    ...refs: FirebaseFirestore.DocumentReference[]
  ): Promise<FirebaseFirestore.DocumentSnapshot[]>;
  batch(): FirebaseFirestore.WriteBatch;
}

/** Runs `sequence` on `db`, returning each operation's outcome and every server time seen. */
async function play(db: Db, collection: string, sequence: readonly Op[]) {
  const ref = (d: Id) => db.collection(collection).doc(d);
  /** Each document's update times as seen, oldest first: `last` and `stale` fence on them. */
  const seen = new Map<Id, Timestamp[]>();
  const times: Timestamp[] = [];
  const note = (d: Id, t: Timestamp | undefined) => {
    if (t === undefined) {
      return;
    }
    times.push(t);
    seen.set(d, [...(seen.get(d) ?? []), t]);
  };
  const precondition = (d: Id, p: Precondition) => {
    const list = seen.get(d) ?? [];
    if (p === 'none') {
      return undefined;
    }
    const t = p === 'last' ? list.at(-1) : list.at(-2);
    // Never seen: fence on a time no document has (before every write of this run).
    return { lastUpdateTime: t ?? new Timestamp(1_000_000_000, 0) };
  };
  const snap = (d: Id, s: FirebaseFirestore.DocumentSnapshot) => {
    note(d, s.updateTime);
    if (
      s.updateTime !== undefined &&
      s.readTime.toMillis() < s.updateTime.toMillis()
    ) {
      throw new Error('read time before update time');
    }
    return { exists: s.exists, data: s.data(), updateTime: s.updateTime };
  };
  const outcomes: Outcome[] = [];
  for (const step of sequence) {
    try {
      switch (step.op) {
        case 'get':
          outcomes.push(snap(step.id, await ref(step.id).get()));
          break;
        case 'getAll': {
          const snaps = await db.getAll(...step.ids.map(ref));
          outcomes.push(snaps.map((s, i) => snap(step.ids[i] as Id, s)));
          break;
        }
        case 'create': {
          const r = await ref(step.id).create(dataOf(step.fields));
          note(step.id, r.writeTime);
          outcomes.push({ writeTime: r.writeTime });
          break;
        }
        case 'set': {
          const r = await ref(step.id).set(dataOf(step.fields));
          note(step.id, r.writeTime);
          outcomes.push({ writeTime: r.writeTime });
          break;
        }
        case 'update': {
          const p = precondition(step.id, step.pre);
          const r = p
            ? await ref(step.id).update(dataOf(step.fields), p)
            : await ref(step.id).update(dataOf(step.fields));
          note(step.id, r.writeTime);
          outcomes.push({ writeTime: r.writeTime });
          break;
        }
        case 'delete': {
          const r = await ref(step.id).delete();
          times.push(r.writeTime);
          outcomes.push({ deleted: true });
          break;
        }
        case 'batch': {
          const batch = db.batch();
          for (const w of step.writes) {
            if (w.op === 'create') {
              batch.create(ref(w.id), dataOf(w.fields));
            } else {
              const p = precondition(w.id, w.pre);
              if (p) {
                batch.update(ref(w.id), dataOf(w.fields), p);
              } else {
                batch.update(ref(w.id), dataOf(w.fields));
              }
            }
          }
          const results = await batch.commit();
          results.forEach((r, i) => {
            note((step.writes[i] as { id: Id }).id, r.writeTime);
          });
          outcomes.push({
            batch: results.map((r) => ({ writeTime: r.writeTime })),
          });
          break;
        }
      }
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      outcomes.push({ error: typeof code === 'number' ? code : String(err) });
    }
  }
  // Each document's final state, read once more.
  for (const d of IDS) {
    outcomes.push(snap(d, await ref(d).get()));
  }
  return { outcomes, times };
}

/**
 * `outcomes` with every server time replaced by its rank among `times` (the write and update times
 * seen). A server-timestamp field is stamped with ms precision, at most a few ms before its write's
 * time on the emulator: it stands for the first write time at or after it. Client timestamps (the
 * generator's, in 2023) are kept as written.
 */
function ranked(outcomes: Outcome[], times: Timestamp[]): unknown {
  const distinct = [
    ...new Map(times.map((t) => [t.valueOf(), t])).values(),
  ].sort((a, b) =>
    a.valueOf() < b.valueOf() ? -1 : a.valueOf() > b.valueOf() ? 1 : 0,
  );
  const rank = new Map(distinct.map((t, i) => [t.valueOf(), i]));
  const walk = (v: unknown, inData = false): unknown => {
    if (v instanceof Timestamp) {
      if (v.seconds < 1_750_000_000) {
        return `client ${v.seconds}.${String(v.nanoseconds).padStart(9, '0')}`;
      }
      if (!inData) {
        return `server #${rank.get(v.valueOf())}`;
      }
      return `stamp of server #${distinct.findIndex((t) => t.valueOf() >= v.valueOf())}`;
    }
    if (Array.isArray(v)) {
      return v.map((x) => walk(x, inData));
    }
    if (v !== null && typeof v === 'object') {
      return Object.fromEntries(
        Object.entries(v)
          .sort(([a], [b]) => (a < b ? -1 : 1))
          .map(([k, x]) => [k, walk(x, inData || k === 'data')]),
      );
    }
    return v;
  };
  return walk(outcomes);
}

/** The emulator's client as the function's own is set (`src/function/register.ts`). */
const emulatorIgnoringUndefined = new Firestore({
  projectId: process.env.GOOGLE_CLOUD_PROJECT ?? 'demo-scheduler-run-once',
  ignoreUndefinedProperties: true,
});

/**
 * Asserts that every sequence `sequences` draws gives the same outcomes on the in-memory store and
 * on the emulator, both with `ignoreUndefinedProperties` as given.
 */
async function assertSameAsEmulator(
  sequences: fc.Arbitrary<Op[]>,
  ignoreUndefinedProperties: boolean,
): Promise<void> {
  const client = ignoreUndefinedProperties
    ? emulatorIgnoringUndefined
    : emulator;
  await fc.assert(
    fc.asyncProperty(sequences, async (sequence) => {
      const collection = `diff_${randomUUID()}`;
      // Each call of the clock 5 ms later: stamps (ms) of successive writes stay apart, as the
      // emulator's do at its round trips' pace.
      let at = Date.now();
      const memory = new MemoryFirestore({
        now: () => (at += 5),
        ignoreUndefinedProperties,
      });
      const real = await play(client as unknown as Db, collection, sequence);
      const fake = await play(
        asFirestore(memory) as unknown as Db,
        collection,
        sequence,
      );
      assert.deepEqual(
        ranked(fake.outcomes, fake.times),
        ranked(real.outcomes, real.times),
      );
    }),
    { numRuns: Number(process.env.DIFF_RUNS ?? 40) },
  );
}

describe('the in-memory Firestore', () => {
  it('answers every generated sequence of operations as the emulator does (results, error codes, update-time order)', async () => {
    await assertSameAsEmulator(ops, false);
  });

  it('leaves undefined properties out of its writes as the client does with ignoreUndefinedProperties, which the function sets', async () => {
    await assertSameAsEmulator(operations(undefinedValues), true);
  });

  it('gives strictly increasing update times at µs precision to writes in the same millisecond', async () => {
    const memory = new MemoryFirestore({ now: () => 1_800_000_000_000 });
    const ref = memory.collection('c').doc('d');
    const first = await ref.create({ n: 1 });
    const second = await ref.update(
      { n: 2 },
      { lastUpdateTime: first.writeTime },
    );
    assert.ok(second.writeTime.valueOf() > first.writeTime.valueOf());
    assert.equal(
      second.writeTime.nanoseconds - first.writeTime.nanoseconds,
      1000,
    );
  });
});
