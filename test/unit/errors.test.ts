/**
 * Describing any thrown value (`errors.ts`), as the HTTP adapter and the logs do. The adapter's
 * behaviour end to end is in `test/handler.test.ts`, on the emulator.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { describeThrown } from '../../src/core/errors.ts';

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

      if (expected instanceof RegExp) assert.match(text, expected);
      else assert.equal(text, expected);
    });
  }
});
