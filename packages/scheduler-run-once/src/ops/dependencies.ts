/**
 * Which packages the declared jobs load that a deploy would not install: `deploy.sh` refuses to
 * deploy (and its dry run says so) when the jobs module imports, directly or through the files it
 * imports, a package that `package.json` lists only in `devDependencies`: devDependencies are the
 * build's (`gcp-build`), and nothing promises the running function finds them, so a cold start
 * could fail to load the job ("Specify dependencies in Node.js",
 * https://cloud.google.com/functions/docs/writing/dependencies, names `dependencies`). The proxy examples'
 * clients (`@google-cloud/workflows`, `@google-cloud/run`, `@google-cloud/cloudbuild`) are
 * devDependencies of this repository, for their tests.
 *
 * Static and bounded: it reads the import and export declarations of the relative `.ts`/`.js` files
 * reachable from the module (at most {@link MAX_FILES}), skips `import type`/`export type` (erased
 * before Node runs the file), and never runs anything.
 */
import { existsSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';

/** The most files the walk reads; a jobs module reaching more is reported as such. */
export const MAX_FILES = 2000;

/** A package a declared job loads that `package.json` lists only in `devDependencies`. */
export interface DevOnlyImport {
  /** The importing file, relative to the repository root. */
  readonly file: string;
  /** The package, e.g. `@google-cloud/workflows`. */
  readonly name: string;
}

/** The `dependencies` and `devDependencies` of a `package.json`. */
export interface PackageLists {
  readonly dependencies?: Readonly<Record<string, string>>;
  readonly devDependencies?: Readonly<Record<string, string>>;
}

/** `from 'x'`, `import 'x'` and `import('x')`, with whether the declaration is type-only. */
const SPECIFIERS =
  /(?:^|[;\n}])\s*(import|export)\s+(type\s+)?(?:[^'";]*?\sfrom\s*)?['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;

/** The value imports of a module's source: what Node loads when it runs the file. */
export function valueImports(source: string): string[] {
  const found: string[] = [];
  for (const m of source.matchAll(SPECIFIERS)) {
    if (m[4] !== undefined) {
      found.push(m[4]);
    } else if (m[2] === undefined && m[3] !== undefined) {
      found.push(m[3]);
    }
  }
  return found;
}

/** The package a bare specifier names: `@scope/name` or `name`, without a subpath. */
export function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@')
    ? parts.slice(0, 2).join('/')
    : (parts[0] ?? specifier);
}

const BUILTIN = new Set(builtinModules);

/**
 * The packages reached from `entry` that `lists` has in `devDependencies` and not in
 * `dependencies`, each with the first file found importing it, in the order found.
 *
 * @param entry - the jobs module, an absolute path.
 * @param root - the repository root, for the files' names.
 * @throws Error if the walk would read more than {@link MAX_FILES} files.
 * @example devOnlyImports('/repo/src/jobs.ts', '/repo', pkg) // [{ file: 'src/workflows-job.ts', name: '@google-cloud/workflows' }]
 */
export function devOnlyImports(
  entry: string,
  root: string,
  lists: PackageLists,
): DevOnlyImport[] {
  const dependencies = lists.dependencies ?? {};
  const devDependencies = lists.devDependencies ?? {};
  const seen = new Set<string>();
  const reported = new Set<string>();
  const found: DevOnlyImport[] = [];
  const queue = [entry];
  for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
    if (seen.has(file) || !existsSync(file)) {
      continue;
    }
    seen.add(file);
    if (seen.size > MAX_FILES) {
      throw new Error(`the jobs module reaches more than ${MAX_FILES} files`);
    }
    for (const specifier of valueImports(readFileSync(file, 'utf8'))) {
      if (specifier.startsWith('.')) {
        queue.push(path.resolve(path.dirname(file), specifier));
        continue;
      }
      if (specifier.startsWith('node:') || BUILTIN.has(specifier)) {
        continue;
      }
      const name = packageOf(specifier);
      if (
        name in dependencies ||
        !(name in devDependencies) ||
        reported.has(name)
      ) {
        continue;
      }
      reported.add(name);
      found.push({ file: path.relative(root, file), name });
    }
  }
  return found;
}

/**
 * The sentences `deploy.sh` reports for {@link devOnlyImports}' findings, one per package.
 *
 * @example devOnlyProblems([{ file: 'src/w.ts', name: '@google-cloud/workflows' }])
 */
export function devOnlyProblems(found: readonly DevOnlyImport[]): string[] {
  return found.map(
    ({ file, name }) =>
      `${file} imports ${name}, which package.json lists only in devDependencies: those are the build's, and the deployed function may not find it. Move it to dependencies: npm install ${name}`,
  );
}
