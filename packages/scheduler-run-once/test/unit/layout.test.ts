/**
 * The layout's import rule, read from the sources (and from the built function): the core that
 * carries the promise imports nothing outside itself but Firestore and Node; policies import the
 * core; the function imports both; nothing the function loads imports the operations commands,
 * the scripts, the benchmarks, the examples or the tests.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';

const ROOT = resolve(import.meta.dirname, '../..');

/** Every `.ts`/`.cts` file under `dir`, relative to the repo. */
function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && /\.c?ts$/.test(e.name))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)));
}

/** The module specifiers a file imports or re-exports (static and dynamic, `require` too). */
function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const specifiers: string[] = [];
  const pattern =
    /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|\brequire\s*\(\s*)(['"])([^'"]+)\1/g;
  for (const match of text.matchAll(pattern)) {
    specifiers.push(match[2] as string);
  }
  return specifiers;
}

/** Where a relative specifier points, relative to the repo; a package's name otherwise. */
function target(file: string, specifier: string): string {
  if (!specifier.startsWith('.')) {
    return specifier;
  }
  return relative(ROOT, resolve(ROOT, dirname(file), specifier));
}

function violations(
  files: string[],
  allowed: (to: string) => boolean,
): string[] {
  return files.flatMap((file) =>
    importsOf(file)
      .map((spec) => target(file, spec))
      .filter((to) => !allowed(to))
      .map((to) => `${file} imports ${to}`),
  );
}

/** The import cycles among `files` (type-only imports included), each as its files in order. */
function cycles(files: string[]): string[][] {
  const edges = new Map(
    files.map((file) => [
      file,
      importsOf(file)
        .filter((spec) => spec.startsWith('.'))
        .map((spec) => target(file, spec))
        .filter((to) => files.includes(to)),
    ]),
  );
  const found: string[][] = [];
  const done = new Set<string>();
  const visit = (file: string, path: string[]) => {
    const seenAt = path.indexOf(file);
    if (seenAt !== -1) {
      found.push(path.slice(seenAt));
      return;
    }
    if (done.has(file)) {
      return;
    }
    for (const to of edges.get(file) ?? []) {
      visit(to, [...path, file]);
    }
    done.add(file);
  };
  for (const file of files) {
    visit(file, []);
  }
  return found;
}

describe('the layout', () => {
  it('has no import cycle in src/, type-only imports included', () => {
    assert.deepEqual(cycles(sources('src')), []);
  });

  it('keeps the core to itself, Firestore and Node', () => {
    const allowed = (to: string) =>
      to.startsWith('src/core/') ||
      to.startsWith('node:') ||
      to === '@google-cloud/firestore';

    assert.deepEqual(violations(sources('src/core'), allowed), []);
  });

  it('builds policies on the core only (no HTTP, no configuration, no user files)', () => {
    const allowed = (to: string) =>
      to.startsWith('src/core/') ||
      to.startsWith('src/policy/') ||
      (!to.startsWith('src/') && !to.startsWith('.') && to !== 'pino');

    assert.deepEqual(violations(sources('src/policy'), allowed), []);
  });

  it('lets the function import the core and policies, never the user files', () => {
    const allowed = (to: string) =>
      to.startsWith('src/core/') ||
      to.startsWith('src/policy/') ||
      to.startsWith('src/function/') ||
      !to.startsWith('src/');

    assert.deepEqual(violations(sources('src/function'), allowed), []);
  });

  it('keeps src/ free of the scripts, benchmarks, examples and tests', () => {
    const allowed = (to: string) =>
      !/^(scripts|bench|examples|test)\//.test(to);

    assert.deepEqual(violations(sources('src'), allowed), []);
  });

  it('keeps the operations commands and the dev loop out of the function (the request path)', () => {
    const outsideTheFunction = (to: string) =>
      /^src\/(ops|dev|cli|testing)\b/.test(to);
    const allowed = (to: string) => !outsideTheFunction(to);
    const requestPath = [
      ...sources('src/core'),
      ...sources('src/policy'),
      ...sources('src/function'),
      'src/index.ts',
      'src/main.cts',
    ];

    assert.deepEqual(violations(requestPath, allowed), []);
  });

  it('keeps the testing entry out of every module but itself', () => {
    const testing = (to: string) =>
      to === 'src/testing.ts' || to.startsWith('src/testing/');
    const others = sources('src').filter((file) => !testing(file));

    assert.deepEqual(
      violations(others, (to) => !testing(to)),
      [],
    );
  });

  it('gives the compiled package (dist/index.js and what it loads) no file outside dist/', (t) => {
    if (!existsSync(join(ROOT, 'dist/index.js'))) {
      t.skip('dist/ is missing: run `npm run build` (npm test builds first)');
      return;
    }
    const seen = new Set<string>();
    const outside: string[] = [];
    const loadsOutsideTheFunction: string[] = [];
    const visit = (file: string) => {
      if (seen.has(file)) {
        return;
      }
      seen.add(file);
      for (const spec of importsOf(file)) {
        if (!spec.startsWith('.')) {
          continue;
        }
        const to = target(file, spec);
        if (!to.startsWith('dist/')) {
          outside.push(`${file} loads ${to}`);
        } else if (/^dist\/(ops|dev|cli|testing)\b/.test(to)) {
          loadsOutsideTheFunction.push(`${file} loads ${to}`);
        } else if (existsSync(join(ROOT, to))) {
          visit(to);
        }
      }
    };

    visit('dist/index.js');

    assert.deepEqual(outside, []);
    assert.deepEqual(loadsOutsideTheFunction, []);
    const testing = [...seen].filter((file) =>
      /^dist\/testing(\.js$|\/)/.test(file),
    );
    assert.deepEqual(
      testing,
      [],
      'a deployed function never loads the testing entry',
    );
    assert.ok(
      seen.has('dist/function/register.js'),
      'the entry loads the HTTP adapter',
    );
    assert.ok(seen.has('dist/core/ledger.js'), 'the function loads the core');
  });
});
