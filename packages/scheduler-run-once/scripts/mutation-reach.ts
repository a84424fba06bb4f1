/**
 * Which survivors of a mutation run the simulator's histories never reach (docs/tests.md,
 * "Mutation testing"): a mutant in code no history executes survives whatever the invariants say,
 * so it needs an action that reaches it, not a stronger invariant.
 *
 * Reach is read from V8's block coverage of one unmutated simulator run over the same histories
 * (`NODE_V8_COVERAGE=DIR node test/sim/cli.ts --histories N --seed 1`): a mutant is reached when
 * the innermost covered range around its start ran at least once. Node strips TypeScript's types by
 * replacing them with blanks, so V8's offsets are the source file's.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Mutant } from './mutation-survivors.ts';

/** One range of V8's block coverage: characters `[startOffset, endOffset)` ran `count` times. */
interface CoveredRange {
  readonly startOffset: number;
  readonly endOffset: number;
  readonly count: number;
}

/** The covered ranges of each script V8 reported, by file URL, from every file in `dir`. */
export function readCoverage(dir: string): Map<string, CoveredRange[]> {
  const byUrl = new Map<string, CoveredRange[]>();
  for (const name of readdirSync(dir)) {
    if (!name.endsWith('.json')) {
      continue;
    }
    const report = JSON.parse(readFileSync(join(dir, name), 'utf8')) as {
      result: {
        url: string;
        functions: { ranges: CoveredRange[] }[];
      }[];
    };
    for (const script of report.result) {
      const ranges = script.functions.flatMap((f) => f.ranges);
      byUrl.set(script.url, [...(byUrl.get(script.url) ?? []), ...ranges]);
    }
  }
  return byUrl;
}

/** The character offset of a report position (line and column from 1) in `source`. */
function offsetOf(source: string, line: number, column: number): number {
  let offset = 0;
  for (let l = 1; l < line; l++) {
    offset = source.indexOf('\n', offset) + 1;
  }
  return offset + column - 1;
}

/**
 * Whether `offset` ran: the count of the innermost range holding it (V8 nests a block's range
 * inside its function's). `undefined` when the script never loaded.
 */
function ranAt(
  ranges: readonly CoveredRange[] | undefined,
  offset: number,
): boolean | undefined {
  if (ranges === undefined) {
    return undefined;
  }
  let innermost: CoveredRange | undefined;
  for (const range of ranges) {
    const holds = range.startOffset <= offset && offset < range.endOffset;
    const narrower =
      innermost === undefined ||
      range.endOffset - range.startOffset <
        innermost.endOffset - innermost.startOffset;
    if (holds && narrower) {
      innermost = range;
    }
  }
  return innermost !== undefined && innermost.count > 0;
}

/**
 * Splits `mutants` (of files relative to `root`) into those whose code the covered run reached and
 * those it never did; a file the run never loaded counts as not reached.
 */
export function splitByReach(
  mutants: readonly Mutant[],
  coverage: ReadonlyMap<string, readonly CoveredRange[]>,
  root: string,
): { reached: Mutant[]; unreached: Mutant[] } {
  const reached: Mutant[] = [];
  const unreached: Mutant[] = [];
  const sources = new Map<string, string>();
  for (const mutant of mutants) {
    const path = resolve(root, mutant.file);
    let source = sources.get(path);
    if (source === undefined) {
      source = readFileSync(path, 'utf8');
      sources.set(path, source);
    }
    const { line, column } = mutant.location.start;
    const ran = ranAt(
      coverage.get(pathToFileURL(path).href),
      offsetOf(source, line, column),
    );
    (ran === true ? reached : unreached).push(mutant);
  }
  return { reached, unreached };
}
