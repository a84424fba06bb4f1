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
  { label: 'a 65-character name', name: `M${'x'.repeat(64)}`, value: () => 1 },
  { label: 'a name starting with _', name: '_under', value: () => 1 },
  { label: 'a name starting with a digit', name: '9lives', value: () => 1 },
  { label: 'an empty name', name: '', value: () => 1 },
  { label: 'a name with a dash', name: 'a-b', value: () => 1 },
  { label: 'a prototype member', name: 'toString', value: () => 1 },
  { label: 'constructor', name: 'constructor', value: () => 1 },
  { label: 'a string of 1501', name: 'str1501', value: () => 's'.repeat(1501) },
  { label: 'NaN', name: 'notANumber', value: () => Number.NaN },
  {
    label: 'Infinity',
    name: 'infinite',
    value: () => Number.POSITIVE_INFINITY,
  },
  { label: 'null', name: 'nothing', value: () => null },
  { label: 'undefined', name: 'unset', value: () => undefined },
  { label: 'a bigint', name: 'big', value: () => 1n },
  { label: 'an array', name: 'list', value: () => [1, 2] },
  { label: 'a Date', name: 'when', value: () => new Date(0) },
  { label: 'a Map', name: 'map', value: () => new Map([['a', 1]]) },
  { label: 'a class instance', name: 'point', value: () => new Point() },
  { label: 'a nested object', name: 'nested', value: () => ({ a: { b: 1 } }) },
  { label: '21 fields', name: 'fields21', value: () => fields(21) },
  { label: 'a field named 1x', name: 'badField', value: () => ({ '1x': 1 }) },
  {
    label: 'a 65-character field name',
    name: 'longField',
    value: () => ({ [`F${'y'.repeat(64)}`]: 1 }),
  },
  {
    label: 'a field that is a prototype member',
    name: 'protoField',
    value: () => ({ valueOf: 1 }),
  },
  {
    label: 'a field of 1501 characters',
    name: 'longValue',
    value: () => ({ a: 's'.repeat(1501) }),
  },
  { label: 'a NaN field', name: 'nanField', value: () => ({ a: Number.NaN }) },
  { label: 'a null field', name: 'nullField', value: () => ({ a: null }) },
  {
    label: 'a symbol key',
    name: 'symbolKey',
    value: () => ({ a: 1, [Symbol('s')]: 2 }),
  },
  {
    label: 'a hidden field',
    name: 'hidden',
    value: () => Object.defineProperty({ a: 1 }, 'b', { value: 2 }),
  },
].map((c) => ({ ...c, valid: false }));

/** Every case, valid ones first. */
export const NOTE_CASES: readonly NoteCase[] = [...VALID, ...INVALID];
