/**
 * The notes a simulated job makes beside its start note: one case a job, drawn by the simulator,
 * valid at the edge of `ctx.note`'s documented limits or just past them (the `Attempt.note` TSDoc
 * in src/core/run-once.ts, docs/jobs.md: a name is a letter then up to 63 letters, digits or `_`,
 * no `Object.prototype` member; a value is a string, a finite number, a boolean, or a plain object
 * of at most 20 such fields, strings of at most 1500 characters). Written from the documentation,
 * not from src/core/notes.ts: invariant 15 judges the product's checks against it.
 */

/** One note: whether the documentation allows it, its name and its value. */
export interface NoteCase {
  readonly label: string;
  readonly valid: boolean;
  /**
   * For an invalid case, a word its refusal must hold: the limit it breaks, in the documentation's
   * terms (a letter first, 1500 characters, 20 fields, finite, a prototype member, a string…), or
   * the kind of value refused (an array, a Date, a Map, a class), so the author knows what to fix.
   */
  readonly says?: string;
  readonly name: string;
  readonly value: () => unknown;
}

const fields = (count: number): Record<string, number> =>
  Object.fromEntries(Array.from({ length: count }, (_, i) => [`f${i}`, i]));

class Point {
  readonly x = 1;
}

/** Notes the documentation allows, each at an edge of a limit. */
const VALID: readonly NoteCase[] = [
  { label: 'a 64-character name', name: `N${'x'.repeat(63)}`, value: () => 1 },
  { label: 'a string of 1500', name: 'str1500', value: () => 's'.repeat(1500) },
  { label: '20 fields', name: 'fields20', value: () => fields(20) },
  {
    label: 'an object without prototype',
    name: 'bare',
    value: () => Object.assign(Object.create(null), { a: 1, b: 'two' }),
  },
  { label: 'false', name: 'flag', value: () => false },
  { label: 'a negative fraction', name: 'neg', value: () => -1.5 },
  { label: 'an empty string', name: 'empty', value: () => '' },
  {
    label: 'fields at their edges',
    name: 'edges',
    value: () => ({ [`F${'y'.repeat(63)}`]: 's'.repeat(1500), ok: true }),
  },
].map((c) => ({ ...c, valid: true }));

/** Notes just past a documented limit, or of a kind the documentation refuses. */
const INVALID: readonly NoteCase[] = [
  {
    label: 'a 65-character name',
    says: 'letter',
    name: `M${'x'.repeat(64)}`,
    value: () => 1,
  },
  {
    label: 'a name starting with _',
    says: 'letter',
    name: '_under',
    value: () => 1,
  },
  {
    label: 'a name starting with a digit',
    says: 'letter',
    name: '9lives',
    value: () => 1,
  },
  { label: 'an empty name', says: 'letter', name: '', value: () => 1 },
  { label: 'a name with a dash', says: 'letter', name: 'a-b', value: () => 1 },
  {
    label: 'a prototype member',
    says: 'prototype',
    name: 'toString',
    value: () => 1,
  },
  {
    label: 'constructor',
    says: 'prototype',
    name: 'constructor',
    value: () => 1,
  },
  {
    label: 'a string of 1501',
    says: '1500',
    name: 'str1501',
    value: () => 's'.repeat(1501),
  },
  { label: 'NaN', says: 'finite', name: 'notANumber', value: () => Number.NaN },
  {
    label: 'Infinity',
    says: 'finite',
    name: 'infinite',
    value: () => Number.POSITIVE_INFINITY,
  },
  { label: 'null', says: 'string', name: 'nothing', value: () => null },
  { label: 'undefined', says: 'string', name: 'unset', value: () => undefined },
  { label: 'a bigint', says: 'string', name: 'big', value: () => 1n },
  { label: 'an array', says: 'array', name: 'list', value: () => [1, 2] },
  {
    label: 'a Date',
    says: 'a Date object',
    name: 'when',
    value: () => new Date(0),
  },
  {
    label: 'a Map',
    says: 'Map',
    name: 'map',
    value: () => new Map([['a', 1]]),
  },
  {
    label: 'a class instance',
    says: 'Point',
    name: 'point',
    value: () => new Point(),
  },
  {
    label: 'a nested object',
    says: 'string',
    name: 'nested',
    value: () => ({ a: { b: 1 } }),
  },
  { label: '21 fields', says: '20', name: 'fields21', value: () => fields(21) },
  {
    label: 'a field named 1x',
    says: 'letter',
    name: 'badField',
    value: () => ({ '1x': 1 }),
  },
  {
    label: 'a 65-character field name',
    says: 'letter',
    name: 'longField',
    value: () => ({ [`F${'y'.repeat(64)}`]: 1 }),
  },
  {
    label: 'a field that is a prototype member',
    says: 'prototype',
    name: 'protoField',
    value: () => ({ valueOf: 1 }),
  },
  {
    label: 'a field of 1501 characters',
    says: '1500',
    name: 'longValue',
    value: () => ({ a: 's'.repeat(1501) }),
  },
  {
    label: 'a NaN field',
    says: 'finite',
    name: 'nanField',
    value: () => ({ a: Number.NaN }),
  },
  {
    label: 'a null field',
    says: 'string',
    name: 'nullField',
    value: () => ({ a: null }),
  },
  {
    label: 'a symbol key',
    says: 'symbol',
    name: 'symbolKey',
    value: () => ({ a: 1, [Symbol('s')]: 2 }),
  },
  {
    label: 'a hidden field',
    says: 'non-enumerable',
    name: 'hidden',
    value: () => Object.defineProperty({ a: 1 }, 'b', { value: 2 }),
  },
].map((c) => ({ ...c, valid: false }));

/** Every case, valid ones first. */
export const NOTE_CASES: readonly NoteCase[] = [...VALID, ...INVALID];

/** One note of a {@link NoteFill}: its name and value. */
export interface PlannedNote {
  readonly name: string;
  readonly value: unknown;
}

/**
 * Notes that fill a run's record to one of its documented bounds exactly (docs/jobs.md: at most
 * 100 notes and 256 KiB per run), then one note past it: every note but the last fits, the last
 * must be refused with a `RunOnceError` naming it. `plan` takes the notes the record already holds.
 */
export interface NoteFill {
  readonly label: string;
  readonly bound: 'count' | 'bytes';
  readonly plan: (held: Readonly<Record<string, unknown>>) => PlannedNote[];
}

/** At most this many notes per run (docs/jobs.md). */
const NOTES_PER_RUN = 100;
/** At most this many bytes of notes per run, 256 KiB (docs/jobs.md). */
const NOTE_BYTES_PER_RUN = 256 * 1024;
/** The longest string a note holds, in characters (docs/jobs.md). */
const LONGEST_STRING = 1500;

/**
 * The storage size of a note's name or value in bytes, by Firestore's rules
 * (https://firebase.google.com/docs/firestore/storage-size): a string is its UTF-8 bytes plus 1, a
 * number 8, a boolean 1, a map the sizes of its field names and values. Written from that page,
 * not from src/core/notes.ts.
 */
export function firestoreSize(value: unknown): number {
  if (typeof value === 'string') {
    return new TextEncoder().encode(value).length + 1;
  }
  if (typeof value === 'number') {
    return 8;
  }
  if (typeof value === 'boolean') {
    return 1;
  }
  const entries = Object.entries(value as Record<string, unknown>);
  return entries.reduce(
    (sum, [name, v]) => sum + firestoreSize(name) + firestoreSize(v),
    0,
  );
}

/** The notes' size as a run's record counts it toward 256 KiB: each note's name and value. */
export function notesSize(notes: Readonly<Record<string, unknown>>): number {
  return firestoreSize(notes);
}

/** A string of `bytes` UTF-8 bytes, its first characters 'é' (2 bytes each), so bytes ≠ length. */
function stringOfBytes(bytes: number): string {
  const wide = Math.min(10, Math.floor(bytes / 2));
  return 'é'.repeat(wide) + 's'.repeat(bytes - 2 * wide);
}

/** A note of 18 strings of 1500 characters, a number and a boolean: about 27 KiB. */
function bigNote(): Record<string, unknown> {
  const strings = Object.fromEntries(
    Array.from({ length: 18 }, (_, i) => [`s${i}`, 's'.repeat(LONGEST_STRING)]),
  );
  return { ...strings, count: 1.5, done: true };
}

/** Notes `true` under new names until the record holds 100, then one more. */
function fillToCount(held: Readonly<Record<string, unknown>>): PlannedNote[] {
  const room = NOTES_PER_RUN - Object.keys(held).length;
  return Array.from({ length: room + 1 }, (_, i) => ({
    name: `fill${i}`,
    value: true,
  }));
}

/**
 * Notes until the record's notes are exactly 256 KiB (big notes, then strings, the last two sized
 * to the byte), then one more.
 */
function fillToBytes(held: Readonly<Record<string, unknown>>): PlannedNote[] {
  const planned: PlannedNote[] = [];
  let room = NOTE_BYTES_PER_RUN - notesSize(held);
  const add = (value: unknown) => {
    const note = { name: `fill${planned.length}`, value };
    planned.push(note);
    room -= firestoreSize(note.name) + firestoreSize(value);
  };
  const big = bigNote();
  const fullString = 's'.repeat(LONGEST_STRING);
  // Each size bounds a note named fill10…fill99 (6 bytes with its + 1).
  const bigSize = firestoreSize('fill10') + firestoreSize(big);
  const stringSize = firestoreSize('fill10') + firestoreSize(fullString);
  while (room > bigSize + 2 * stringSize) {
    add(big);
  }
  while (room > 2 * stringSize) {
    add(fullString);
  }
  // Two notes end exactly at the bound: each about half of what is left (room ≤ 2 strings).
  const nameSize = firestoreSize(`fill${planned.length}`);
  const firstBytes = Math.floor(room / 2) - nameSize - 1;
  add(stringOfBytes(firstBytes));
  add(stringOfBytes(room - firestoreSize(`fill${planned.length}`) - 1));
  add(true);
  return planned;
}

/** The fills a simulated job may make instead of its case note (history option `noteFills`). */
export const NOTE_FILLS: readonly NoteFill[] = [
  { label: '100 notes, then a 101st', bound: 'count', plan: fillToCount },
  {
    label: 'notes of exactly 256 KiB, then one more',
    bound: 'bytes',
    plan: fillToBytes,
  },
];
