/**
 * `scripts/mutation-reach.ts`: which survivors of a mutation run the simulator's histories reach,
 * from V8's block coverage of an unmutated run. Hand-written coverage of a small source file.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { readCoverage, splitByReach } from '../../scripts/mutation-reach.ts';
import type { Mutant } from '../../scripts/mutation-survivors.ts';

const dir = mkdtempSync(join(tmpdir(), 'mutation-reach-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Line 2 ran; the `if`'s block (offsets 51 to 68, around line 3) never did. */
const SOURCE = [
  'export function f(a: number): number {', // offsets 0-37
  '  if (a > 0) {', // 39-52
  '    return 1;', // 54-66
  '  }',
  '  return 0;',
  '}',
  '',
].join('\n');

const mutant = (line: number, column: number): Mutant => ({
  id: `${line}:${column}`,
  file: 'f.ts',
  mutatorName: 'ConditionalExpression',
  replacement: 'true',
  status: 'Survived',
  location: { start: { line, column }, end: { line, column: column + 1 } },
});

describe('splitByReach', () => {
  writeFileSync(join(dir, 'f.ts'), SOURCE);
  const coverageDir = join(dir, 'coverage');
  const url = pathToFileURL(join(dir, 'f.ts')).href;
  const ranges = [
    { startOffset: 0, endOffset: SOURCE.length, count: 1 },
    { startOffset: 51, endOffset: 68, count: 0 },
  ];
  it('splits survivors by the innermost covered range around their start', () => {
    mkdirSync(coverageDir, { recursive: true });
    writeFileSync(
      join(coverageDir, 'coverage-1.json'),
      JSON.stringify({ result: [{ url, functions: [{ ranges }] }] }),
    );
    const reachedLine = mutant(2, 7);
    const blockLine = mutant(3, 5);

    const { reached, unreached } = splitByReach(
      [reachedLine, blockLine],
      readCoverage(coverageDir),
      dir,
    );

    assert.deepEqual(
      reached.map((m) => m.id),
      ['2:7'],
    );
    assert.deepEqual(
      unreached.map((m) => m.id),
      ['3:5'],
    );
  });

  it('counts a file the run never loaded as not reached', () => {
    const { reached, unreached } = splitByReach([mutant(2, 7)], new Map(), dir);

    assert.equal(reached.length, 0);
    assert.equal(unreached.length, 1);
  });
});
