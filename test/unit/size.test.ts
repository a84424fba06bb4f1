/**
 * The request path's files stay small enough to read one at a time: none over 450 lines. Measured
 * on the built graph (`build/main.cjs` and every module it loads), mapped back to the sources; the
 * user's own files (`src/job.ts`, `src/jobs.ts`, `src/index.ts`) are never measured. The line
 * budget of the whole graph (issue 28) is retired (issue 41): it was met by packing, not by
 * simplifying. No function in `src/` over 60 lines is Biome's `noExcessiveLinesPerFunction`
 * (biome.json), so `npm run lint` enforces it.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';

const ROOT = resolve(import.meta.dirname, '../..');

/** Lines of any one file of the library. */
const BUDGET = { file: 450 } as const;
/** The user's files: theirs to grow. */
const USER_FILES = ['src/job.ts', 'src/jobs.ts', 'src/index.ts'];

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

describe('the request path', () => {
  const built = existsSync(join(ROOT, 'build/main.cjs'));
  const files = built ? requestPath().filter((f) => !USER_FILES.includes(f)) : [];
  const skip = built ? false : 'build/ is missing: run `npm run build` (npm test builds first)';

  it(`has no file over ${BUDGET.file} lines`, { skip }, () => {
    assert.ok(files.includes('src/core/ledger.ts'), 'the graph holds the core');
    const over = files
      .map((f) => `${f}: ${lineCount(f)}`)
      .filter((_, i) => lineCount(files[i] as string) > BUDGET.file);
    assert.deepEqual(over, []);
  });
});
