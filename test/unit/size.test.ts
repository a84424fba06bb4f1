/**
 * The request path's size budget (issue 28): what the deployed function loads from `src/` stays
 * small enough to read in an afternoon. Measured on the built graph (`build/main.cjs` and every
 * module it loads), mapped back to the sources. No function in `src/` over 60 lines is Biome's
 * `noExcessiveLinesPerFunction` (biome.json), so `npm run lint` enforces it.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';

const ROOT = resolve(import.meta.dirname, '../..');

/** Lines of the whole graph, of `src/core/` and of any one file. */
const BUDGET = { graph: 5_000, core: 1_600, file: 450 } as const;

/** The relative modules a built file `require`s or imports. */
function loads(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const pattern = /(?:\brequire\s*\(\s*|\bfrom\s*|\bimport\s*\(\s*)(['"])(\.[^'"]+)\1/g;
  return [...text.matchAll(pattern)].map((m) =>
    relative(ROOT, resolve(ROOT, dirname(file), m[2] as string)),
  );
}

/** The sources (`src/…ts`) behind what `build/main.cjs` loads. */
function requestPath(): string[] {
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file) || !existsSync(join(ROOT, file))) return;
    seen.add(file);
    for (const to of loads(file)) visit(to);
  };
  visit('build/main.cjs');
  return [...seen]
    .map((b) =>
      b
        .replace(/^build\//, 'src/')
        .replace(/\.cjs$/, '.cts')
        .replace(/\.js$/, '.ts'),
    )
    .filter((s) => existsSync(join(ROOT, s)))
    .sort();
}

function lineCount(file: string): number {
  return readFileSync(join(ROOT, file), 'utf8').split('\n').length - 1;
}

describe('the request path', () => {
  const built = existsSync(join(ROOT, 'build/main.cjs'));
  const files = built ? requestPath() : [];
  const skip = built ? false : 'build/ is missing: run `npm run build` (npm test builds first)';
  // Reported, not enforced, until issue 28's pass lands; then this line goes.
  const todo = 'issue 28: the request-path pass is under way';

  it(`loads at most ${BUDGET.graph} lines of src/, ${BUDGET.core} of them the core`, {
    skip,
    todo,
  }, () => {
    const total = files.reduce((sum, f) => sum + lineCount(f), 0);
    const core = files
      .filter((f) => f.startsWith('src/core/'))
      .reduce((sum, f) => sum + lineCount(f), 0);
    assert.ok(files.includes('src/core/ledger.ts'), 'the graph holds the core');
    assert.ok(total <= BUDGET.graph, `the request path is ${total} lines (budget ${BUDGET.graph})`);
    assert.ok(core <= BUDGET.core, `src/core/ is ${core} lines (budget ${BUDGET.core})`);
  });

  it(`has no file over ${BUDGET.file} lines`, { skip, todo }, () => {
    const over = files
      .map((f) => `${f}: ${lineCount(f)}`)
      .filter((_, i) => lineCount(files[i] as string) > BUDGET.file);
    assert.deepEqual(over, []);
  });
});
