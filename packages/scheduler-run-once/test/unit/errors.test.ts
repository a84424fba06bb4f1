/**
 * Describing any thrown value (`errors.ts`), as the HTTP adapter and the logs do, and classifying
 * whatever a Firestore call rejects with (`callFirestore`). The adapter's behaviour end to end is in
 * `test/handler.test.ts`, on the emulator.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Firestore } from '@google-cloud/firestore';
import {
  DatabaseNotFoundError,
  describeThrown,
  LedgerUnavailableError,
} from '../../src/core/errors.ts';
import { callFirestore } from '../../src/core/run-documents.ts';

describe('describeThrown', () => {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  const cases: [string, unknown, string | RegExp][] = [
    ['an Error', new Error('boom'), 'boom'],
    ['a string', 'plain', 'plain'],
    ['an object with a message', { message: 'custom' }, 'custom'],
    ['an object without a prototype', Object.create(null), '[object Object]'],
    ['undefined', undefined, 'undefined'],
    ['a symbol', Symbol('s'), 'Symbol(s)'],
    [
      'an object whose message getter throws',
      Object.defineProperty({}, 'message', {
        get() {
          throw new Error('getter');
        },
      }),
      '[object Object]',
    ],
    ['a revoked proxy', proxy, /^(\[object Object\]|an unprintable value)$/],
  ];
  for (const [what, value, expected] of cases) {
    it(`describes ${what} without throwing`, () => {
      const text = describeThrown(value);

      if (expected instanceof RegExp) {
        assert.match(text, expected);
      } else {
        assert.equal(text, expected);
      }
    });
  }
});

describe('callFirestore classifies whatever the call rejects with, and always settles', () => {
  const db = { databaseId: 'runs-db' } as unknown as Firestore;
  const revoked = () => {
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    return proxy;
  };
  const codeGetterThrows = Object.defineProperty({}, 'code', {
    get() {
      throw new Error('getter');
    },
  });
  const uninspectable: [string, () => unknown][] = [
    ['an object without a prototype', () => Object.create(null)],
    ['a revoked proxy', revoked],
    ['an object whose code getter throws', () => codeGetterThrows],
  ];
  for (const [what, value] of uninspectable) {
    it(`a rejection with ${what} is LedgerUnavailableError (a 503 Scheduler retries), not a hang`, async () => {
      const call = callFirestore(db, 1_000, 'claim', () =>
        Promise.reject(value()),
      );
      await assert.rejects(call, (err: unknown) => {
        assert.ok(err instanceof LedgerUnavailableError);
        assert.ok(!(err instanceof DatabaseNotFoundError));
        assert.match(err.message, /^Firestore claim failed: /);
        return true;
      });
    });
    it(`a synchronous throw of ${what} is LedgerUnavailableError`, async () => {
      const call = callFirestore(db, 1_000, 'claim', () => {
        throw value();
      });
      await assert.rejects(call, LedgerUnavailableError);
    });
  }

  it('NOT_FOUND is DatabaseNotFoundError naming the database; other codes are unavailable', async () => {
    const notFound = Object.assign(new Error('5 NOT_FOUND'), { code: 5 });
    await assert.rejects(
      callFirestore(db, 1_000, 'read', () => Promise.reject(notFound)),
      (err: unknown) =>
        err instanceof DatabaseNotFoundError && /"runs-db"/.test(err.message),
    );
    const aborted = Object.assign(new Error('10 ABORTED: contention'), {
      code: 10,
    });
    await assert.rejects(
      callFirestore(db, 1_000, 'read', () => Promise.reject(aborted)),
      (err: unknown) =>
        err instanceof LedgerUnavailableError &&
        !(err instanceof DatabaseNotFoundError) &&
        err.message === 'Firestore read failed: 10 ABORTED: contention',
    );
  });

  it('a failure after the timeout answered leaves no unhandled rejection', async (t) => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    t.after(() => process.off('unhandledRejection', onUnhandled));
    let failLate: (value: unknown) => void = () => {};
    const late = new Promise((_, reject) => {
      failLate = reject;
    });
    await assert.rejects(
      callFirestore(db, 20, 'claim', () => late),
      /did not answer the claim within 20 ms/,
    );
    failLate(revoked());
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(unhandled, []);
  });
});
