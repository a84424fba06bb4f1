/** What a job may note in its run's record (`ctx.note`): plain data only, each note bounded. */
import { Timestamp } from '@google-cloud/firestore';

type Scalar = string | number | boolean;

/** A value a job may note in its run's record: a scalar, or a flat object of scalars. */
export type NoteValue = Scalar | Readonly<Record<string, Scalar>>;

/** A note as written: its name (`notes.NAME`) and value. */
export type Note = { readonly name: string; readonly value: NoteValue };

/** Limits of one note (`noteProblem` states them), so a record stays small and readable. */
const NOTE_NAME = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;
const MAX_NOTE_STRING = 1500;
const MAX_NOTE_FIELDS = 20;

/**
 * Most notes, and most bytes of notes ({@link storedSize}), one record holds: far below Firestore's
 * document limit (1 MiB, https://firebase.google.com/docs/firestore/quotas), so the record can
 * always take its completion or release.
 */
export const MAX_NOTES = 100;
export const MAX_NOTES_BYTES = 256 * 1024;

/**
 * The storage size of a stored value in bytes, by Firestore's rules
 * (https://firebase.google.com/docs/firestore/storage-size): exact for every value a note can hold.
 */
export function storedSize(value: unknown): number {
  if (typeof value === 'string') {
    return Buffer.byteLength(value, 'utf8') + 1;
  }
  if (typeof value === 'boolean' || value === null || value === undefined) {
    return 1;
  }
  if (Array.isArray(value)) {
    return value.reduce((sum: number, v) => sum + storedSize(v), 0);
  }
  if (typeof value !== 'object' || value instanceof Timestamp) {
    return 8; // a number, a timestamp
  }
  return Object.entries(value).reduce(
    (sum, [key, v]) => sum + storedSize(key) + storedSize(v),
    0,
  );
}

/**
 * What is wrong with adding `value` under `name` to a record's `notes`, or `undefined`: more than
 * {@link MAX_NOTES} notes or {@link MAX_NOTES_BYTES} bytes (a replaced note counts its new value).
 */
export function notesBoundProblem(
  notes: Readonly<Record<string, unknown>>,
  name: string,
  value: NoteValue,
): string | undefined {
  const next = { ...notes, [name]: value };
  const count = Object.keys(next).length;
  if (count > MAX_NOTES) {
    return `note ${name} would be note ${count} of the run's record, which holds at most ${MAX_NOTES}; note less, or replace an existing note`;
  }
  const bytes = storedSize(next);
  if (bytes > MAX_NOTES_BYTES) {
    return `note ${name} would bring the run's notes to ${bytes} bytes, above the ${MAX_NOTES_BYTES} a record holds; note less, or replace an existing note`;
  }
  return undefined;
}

/** An object whose prototype is `Object.prototype` or `null`, with own enumerable string keys only. */
function isPlainObject(value: object): boolean {
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) {
    return false;
  }
  return Reflect.ownKeys(value).every(
    (key) =>
      typeof key === 'string' &&
      Object.getOwnPropertyDescriptor(value, key)?.enumerable,
  );
}

/** What a note's value that is not a plain object is, as a refusal says it. */
function objectKind(value: object): string {
  if (Array.isArray(value)) {
    return 'an array';
  }
  const proto = Object.getPrototypeOf(value);
  if (proto === Object.prototype || proto === null) {
    return 'an object with a symbol or non-enumerable key';
  }
  return `a ${value.constructor?.name ?? 'non-plain'} object`;
}

function scalarProblem(value: unknown): string | undefined {
  if (typeof value === 'number' && !Number.isFinite(value)) {
    return 'a number must be finite';
  }
  if (typeof value === 'string' && value.length > MAX_NOTE_STRING) {
    return `a string holds at most ${MAX_NOTE_STRING} characters`;
  }
  const scalar = ['boolean', 'number', 'string'].includes(typeof value);
  return scalar ? undefined : 'a value must be a string, a number or a boolean';
}

/**
 * What is wrong with a note, or `undefined`, in a message naming the note. A name is a letter, then
 * up to 63 letters, digits or `_`, and no `Object.prototype` member; a value is a scalar or a plain
 * object of at most 20 scalars, strings ≤ 1500 characters. A `Map`, a `Date`, an array or a class
 * instance is refused: Firestore would store it as something else, or refuse it after its retries.
 */
export function noteProblem(name: string, value: unknown): string | undefined {
  if (!NOTE_NAME.test(name)) {
    return `note name ${JSON.stringify(name)} must be a letter, then up to 63 letters, digits or "_"`;
  }
  if (name in Object.prototype) {
    return `note name ${JSON.stringify(name)} is a member of every object's prototype; choose another name`;
  }
  if (typeof value !== 'object' || value === null) {
    const problem = scalarProblem(value);
    return problem === undefined ? undefined : `note ${name}: ${problem}`;
  }
  if (!isPlainObject(value)) {
    const what = objectKind(value);
    return `note ${name} is ${what}: a note is a scalar or a plain object ({ … }) of scalars; convert it first (e.g. a Date with toISOString())`;
  }
  const entries = Object.entries(value);
  if (entries.length > MAX_NOTE_FIELDS) {
    return `note ${name} has ${entries.length} fields: a note is a scalar or a flat object of at most ${MAX_NOTE_FIELDS} fields`;
  }
  for (const [key, field] of entries) {
    if (!NOTE_NAME.test(key)) {
      return `field ${JSON.stringify(key)} of note ${name} must be a letter, then letters, digits or "_"`;
    }
    if (key in Object.prototype) {
      return `field ${JSON.stringify(key)} of note ${name} is a member of every object's prototype; choose another name`;
    }
    const problem = scalarProblem(field);
    if (problem !== undefined) {
      return `field ${key} of note ${name}: ${problem}`;
    }
  }
  return undefined;
}
