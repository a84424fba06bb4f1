/**
 * The library's source reads as densely as the models do, measured as `scripts/density.ts`
 * measures them (issue 41's targets: at most 7 tokens a code line, at most 15 unbraced `if`
 * bodies a 1,000 code lines, no function over 60 code lines). The library's own files only: a
 * user's files are never measured.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  figures,
  measure,
  measureLibrary,
  missedTargets,
} from '../../scripts/density.ts';

describe('the density of the library', () => {
  it('meets the targets over src/, scripts/ and the simulator', () => {
    const all = measureLibrary().at(-1);

    assert.ok(all !== undefined);
    assert.deepEqual(missedTargets(all.density), []);
  });

  it('counts what it says: tokens, code lines, unbraced ifs and function lengths', () => {
    const code = [
      '// a comment is no code line',
      'export function f(a: number): number {',
      '  if (a > 1) return a;',
      '  return a > 0 ? 1 : 2;',
      '}',
    ].join('\n');

    const measured = figures(measure(code));

    assert.equal(measured.codeLines, 4);
    assert.equal(measured.unbracedIfsPer1000, 250);
    assert.equal(measured.ternariesPer1000, 250);
    assert.equal(measured.longestFunctionLines, 4);
  });
});
