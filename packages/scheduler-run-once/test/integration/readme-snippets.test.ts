/**
 * The README's code is paste-safe: every TypeScript block carries a marker, an HTML comment on the
 * line above it, saying where it goes, and each block that goes somewhere compiles (`tsc`, the
 * project's settings) and passes Biome (lint and format, the project's `biome.json`) when pasted
 * there, with the rest of `src/` as it is. Markers:
 *
 * - `<!-- snippet: src/jobs.ts -->`: the block is that whole file.
 * - `<!-- snippet: src/job.ts runJobLogic -->`: the block replaces the top-level declaration
 *   `runJobLogic` of that file (from its `export` line to the first line that starts with `}`).
 * - `… as-shipped` after either: the block must also be exactly what the file holds now, so the
 *   README shows the code the starter ships.
 * - `<!-- snippet: fragment -->`: an excerpt that needs surroundings the README does not show; not
 *   compiled.
 *
 * Each pasted variant is a copy of `src/` in a temporary directory (with a link to `node_modules`,
 * the repository's `biome.json` and a package.json of type module); one `tsc` run checks them all,
 * one Biome run lints and format-checks the pasted files. In every copy, `src/job.ts` is the example
 * job as the starter ships it (`test/fixtures/example-job.ts.txt`), not yours: the blocks are checked
 * against the core's types, so replacing the example job leaves this test green.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { binPath, nodeModulesWithTsc } from '../../src/dev/local-processes.ts';
import {
  STARTER_CHECKS_SKIP,
  STARTER_ROOT,
} from '../fixtures/starter-checkout.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
/** The starter, the repository's root: its README and `src/` are what this test reads. */
const STARTER = STARTER_ROOT;
/** The example job as the starter ships it: what the README's blocks are pasted into and shown as. */
const EXAMPLE_JOB = path.join(ROOT, 'test/fixtures/example-job.ts.txt');

/** A file the README names, as the starter ships it (`src/job.ts` is the example's copy). */
function shipped(file: string): string {
  return readFileSync(
    file === 'src/job.ts' ? EXAMPLE_JOB : path.join(STARTER, file),
    'utf8',
  );
}
const TSC = binPath('tsc');
const BIOME = binPath('biome');

interface Snippet {
  /** The README line of the block's opening fence, 1-based. */
  readonly line: number;
  readonly code: string;
  /** Where it goes: a file under the repository root; absent for a fragment. */
  readonly file?: string;
  /** The top-level declaration it replaces; absent for a whole file. */
  readonly declaration?: string;
  readonly asShipped: boolean;
}

/** Every ```ts block of `markdown` with its marker; blocks without one are `unmarked`. */
function snippetsOf(markdown: string): {
  snippets: Snippet[];
  unmarked: number[];
} {
  const lines = markdown.split('\n');
  const snippets: Snippet[] = [];
  const unmarked: number[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!/^\s*```ts\s*$/.test(lines[i] ?? '')) {
      continue;
    }
    const indent = /^\s*/.exec(lines[i] ?? '')?.[0].length ?? 0;
    const end = lines.findIndex((l, j) => j > i && /^\s*```\s*$/.test(l));
    const code = lines
      .slice(i + 1, end)
      .map((l) => l.slice(indent))
      .join('\n');
    const marker = /^\s*<!-- snippet: (.+?) -->\s*$/.exec(
      lines[i - 1] ?? '',
    )?.[1];
    if (marker === undefined) {
      unmarked.push(i + 1);
    } else if (marker !== 'fragment') {
      const [file, ...rest] = marker.split(/\s+/);
      const asShipped = rest.includes('as-shipped');
      const declaration = rest.find((word) => word !== 'as-shipped');
      snippets.push({
        line: i + 1,
        code: `${code}\n`,
        asShipped,
        ...(file === undefined ? {} : { file }),
        ...(declaration === undefined ? {} : { declaration }),
      });
    }
    i = end;
  }
  return { snippets, unmarked };
}

/** Where `declaration` sits in `source`: its `export` line to the first line starting with `}`. */
function declarationSpan(
  source: string,
  declaration: string,
): [number, number] | undefined {
  const lines = source.split('\n');
  const start = lines.findIndex((l) =>
    new RegExp(
      `^export (?:async )?(?:function|const|let|class|interface|type) ${declaration}\\b`,
    ).test(l),
  );
  if (start === -1) {
    return undefined;
  }
  const end = lines.findIndex((l, j) => j > start && l.startsWith('}'));
  return end === -1 ? undefined : [start, end];
}

/** `source` with `declaration` replaced by `code`, or `undefined` if it has no such declaration. */
function pasted(
  source: string,
  declaration: string,
  code: string,
): string | undefined {
  const span = declarationSpan(source, declaration);
  if (span === undefined) {
    return undefined;
  }
  const lines = source.split('\n');
  return [
    ...lines.slice(0, span[0]),
    code.trimEnd(),
    ...lines.slice(span[1] + 1),
  ].join('\n');
}

const { snippets, unmarked } = STARTER_CHECKS_SKIP
  ? { snippets: [], unmarked: [] }
  : snippetsOf(readFileSync(path.join(STARTER, 'README.md'), 'utf8'));
const scratch = mkdtempSync(path.join(tmpdir(), 'readme-snippets-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

describe("the starter's README.md code blocks", {
  skip: STARTER_CHECKS_SKIP,
}, () => {
  it('each TypeScript block says where it goes (a snippet marker on the line above)', () => {
    assert.deepEqual(
      unmarked,
      [],
      'add <!-- snippet: FILE [DECLARATION] [as-shipped] --> or <!-- snippet: fragment --> above the blocks at these README lines',
    );
    assert.ok(snippets.length >= 3, `only ${snippets.length} checked blocks`);
  });

  it("shows the example job as the starter ships it, where marked 'as-shipped'", () => {
    const asShipped = snippets.filter((s) => s.asShipped);

    for (const snippet of asShipped) {
      const source = shipped(snippet.file ?? '');
      const span =
        snippet.declaration && declarationSpan(source, snippet.declaration);
      const current = span
        ? source
            .split('\n')
            .slice(span[0], span[1] + 1)
            .join('\n')
        : source;
      assert.equal(
        snippet.code.trimEnd(),
        current.trimEnd(),
        `README line ${snippet.line} shows the starter's ${snippet.file} (for src/job.ts: ` +
          'test/fixtures/example-job.ts.txt), which differs: make them agree.',
      );
    }
    assert.ok(
      asShipped.some(
        (s) => s.file === 'src/job.ts' && s.declaration === 'runJobLogic',
      ),
    );
  });

  it('each block compiles and passes Biome when pasted in its place', () => {
    // One copy of src/ per block, with the block pasted in; a tsconfig and biome.json as the repo's.
    const pastedFiles: string[] = [];
    const where = new Map<string, number>();
    for (const [n, snippet] of snippets.entries()) {
      const dir = `s${n}`;
      cpSync(path.join(STARTER, 'src'), path.join(scratch, dir, 'src'), {
        recursive: true,
      });
      cpSync(EXAMPLE_JOB, path.join(scratch, dir, 'src/job.ts'));
      const target = path.join(dir, snippet.file ?? '');
      const source = shipped(snippet.file ?? '');
      const text =
        snippet.declaration === undefined
          ? snippet.code
          : pasted(source, snippet.declaration, snippet.code);
      assert.ok(
        text !== undefined,
        `README line ${snippet.line}: ${snippet.file} declares no ${snippet.declaration}`,
      );
      writeFileSync(path.join(scratch, target), text);
      pastedFiles.push(target);
      where.set(dir, snippet.line);
    }
    symlinkSync(
      nodeModulesWithTsc(),
      path.join(scratch, 'node_modules'),
      'dir',
    );
    cpSync(path.join(STARTER, 'biome.json'), path.join(scratch, 'biome.json'));
    // The repository is an ES module package: tsc reads `.ts` files by the nearest package.json.
    writeFileSync(
      path.join(scratch, 'package.json'),
      JSON.stringify({ type: 'module' }),
    );
    writeFileSync(
      path.join(scratch, 'tsconfig.json'),
      JSON.stringify({
        extends: path.join(STARTER, 'tsconfig.json'),
        compilerOptions: { noEmit: true },
        include: [...where.keys()].map((dir) => `${dir}/src`),
      }),
    );
    const readmeLine = (output: string) =>
      output.replace(
        /\bs(\d+)\//g,
        (_, n: string) => `[README line ${where.get(`s${n}`)}] `,
      );

    const tsc = spawnSync(process.execPath, [TSC, '-p', 'tsconfig.json'], {
      cwd: scratch,
      encoding: 'utf8',
    });
    const biome = spawnSync(
      process.execPath,
      [BIOME, 'check', '--colors=off', ...pastedFiles],
      {
        cwd: scratch,
        encoding: 'utf8',
      },
    );

    assert.equal(tsc.status, 0, readmeLine(tsc.stdout + tsc.stderr));
    assert.equal(biome.status, 0, readmeLine(biome.stdout + biome.stderr));
  });
});
