/**
 * The request path's size budget (issue 28): what the deployed function loads from `src/` stays
 * small enough to read in an afternoon. Measured on the built graph (`build/main.cjs` and every
 * module it loads), mapped back to the sources: a ceiling where it stands, enforced, and the issue's
 * budget, reported until met. No function in `src/` over 60 lines is Biome's
 * `noExcessiveLinesPerFunction` (biome.json), so `npm run lint` enforces it.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';

const ROOT = resolve(import.meta.dirname, '../..');

/** Lines of the whole graph, of `src/core/` and of any one file: issue 28's budget. */
const BUDGET = { graph: 5_006, core: 1_600, file: 450 } as const;
/** Where the request path stands (issue 28, seventh pass): it may shrink, never grow. */
const CEILING = { graph: 5_006, core: 1_496 } as const;

/** The relative modules a built file `require`s or imports. */
function loads(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const pattern = /(?:\brequire\s*\(\s*|\bfrom\s*|\bimport\s*\(?\s*)(['"])(\.[^'"]+)\1/g;
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

/** Lines of code: neither blank nor comment (`//` lines and `/* … *\/` blocks, TSDoc included). */
function codeLineCount(file: string): number {
  let inBlock = false;
  let code = 0;
  for (const line of readFileSync(join(ROOT, file), 'utf8').split('\n')) {
    const text = line.trim();
    if (inBlock) inBlock = !text.includes('*/');
    else if (text.startsWith('/*')) inBlock = !text.includes('*/');
    else if (text !== '' && !text.startsWith('//')) code++;
  }
  return code;
}

describe('the request path', () => {
  const built = existsSync(join(ROOT, 'build/main.cjs'));
  const files = built ? requestPath() : [];
  const skip = built ? false : 'build/ is missing: run `npm run build` (npm test builds first)';

  const lines = (inCore: boolean) =>
    files
      .filter((f) => !inCore || f.startsWith('src/core/'))
      .reduce((sum, f) => sum + lineCount(f), 0);

  it(`never grows past ${CEILING.graph} lines of src/, ${CEILING.core} of them the core`, {
    skip,
  }, () => {
    assert.ok(files.includes('src/core/ledger.ts'), 'the graph holds the core');
    assert.ok(
      lines(false) <= CEILING.graph,
      `the request path is ${lines(false)} lines (ceiling ${CEILING.graph})`,
    );
    assert.ok(
      lines(true) <= CEILING.core,
      `src/core/ is ${lines(true)} lines (ceiling ${CEILING.core})`,
    );
  });

  it(`loads at most ${BUDGET.graph} lines of src/, ${BUDGET.core} of them the core`, {
    skip,
  }, () => {
    assert.ok(
      lines(false) <= BUDGET.graph,
      `the request path is ${lines(false)} lines (budget ${BUDGET.graph})`,
    );
    assert.ok(
      lines(true) <= BUDGET.core,
      `src/core/ is ${lines(true)} lines (budget ${BUDGET.core})`,
    );
  });

  it(`holds at most ${BUDGET.graph} lines of code, ${BUDGET.core} of them the core (comments and blank lines aside)`, {
    skip,
  }, () => {
    const code = (inCore: boolean) =>
      files
        .filter((f) => !inCore || f.startsWith('src/core/'))
        .reduce((sum, f) => sum + codeLineCount(f), 0);
    assert.ok(code(false) <= BUDGET.graph, `the request path has ${code(false)} lines of code`);
    assert.ok(code(true) <= BUDGET.core, `src/core/ has ${code(true)} lines of code`);
  });

  it(`has no file over ${BUDGET.file} lines`, { skip }, () => {
    const over = files
      .map((f) => `${f}: ${lineCount(f)}`)
      .filter((_, i) => lineCount(files[i] as string) > BUDGET.file);
    assert.deepEqual(over, []);
  });
});
