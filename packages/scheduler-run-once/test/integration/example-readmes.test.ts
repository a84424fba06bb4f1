/**
 * Each proxy example's README, followed literally: its "Use it" step 1 copies the files it names
 * into `src/` and applies the import fixes it lists (`` `FROM` → `TO` ``), the block marked
 * `<!-- example: src/jobs.ts -->` becomes `src/jobs.ts`, and the result compiles (`tsc`, the
 * project's settings). One copy of `src/` per example in a temporary directory, one `tsc` run for
 * all. `src/job.ts` is the example job as the starter ships it, so replacing yours changes nothing
 * here. Each README also names its own test command, whose files exist.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { binPath, nodeModulesWithTsc } from '../../src/dev/local-processes.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const TSC = binPath('tsc');
const EXAMPLES = readdirSync(path.join(ROOT, 'examples')).filter((name) =>
  existsSync(path.join(ROOT, 'examples', name, 'README.md')),
);

/** What step 1 of "Use it" says: the files to copy (relative to the example) and the import fixes. */
function stepOne(readme: string): {
  files: string[];
  fixes: [string, string][];
} {
  const use = readme.slice(readme.indexOf('## Use it'));
  const step = /^1\. (Copy [\s\S]*?)(?=^\d\. )/m.exec(use)?.[1] ?? '';
  const [copy = '', fix = ''] = step.split(/into `src\/`/);
  const files = [...copy.matchAll(/`([^`]+\.ts)`/g)].map((m) => m[1] as string);
  const fixes = [...fix.matchAll(/`([^`]+)`\s*→\s*`([^`]+)`/g)].map(
    (m) => [m[1], m[2]] as [string, string],
  );
  return { files, fixes };
}

/** The block marked `<!-- example: src/jobs.ts -->`, without the list item's indentation. */
function jobsBlock(readme: string): string | undefined {
  const m =
    /<!-- example: src\/jobs\.ts -->\n( *)```ts\n([\s\S]*?)\n *```/.exec(
      readme,
    );
  if (m === null) {
    return undefined;
  }
  const indent = (m[1] ?? '').length;
  return `${(m[2] ?? '')
    .split('\n')
    .map((line) =>
      line.slice(Math.min(indent, line.length - line.trimStart().length)),
    )
    .join('\n')}\n`;
}

const scratch = mkdtempSync(path.join(tmpdir(), 'example-readmes-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

describe('the examples, followed as their READMEs say', () => {
  it('names the files to copy, the import fixes and a whole src/jobs.ts in each README', () => {
    assert.ok(EXAMPLES.length >= 3, EXAMPLES.join(', '));
    for (const example of EXAMPLES) {
      const readme = readFileSync(
        path.join(ROOT, 'examples', example, 'README.md'),
        'utf8',
      );
      const { files, fixes } = stepOne(readme);
      assert.ok(files.length > 0, `${example}: step 1 names no file to copy`);
      assert.ok(fixes.length > 0, `${example}: step 1 names no import fix`);
      assert.ok(
        jobsBlock(readme),
        `${example}: no <!-- example: src/jobs.ts --> block`,
      );
    }
  });

  it('compiles, each example copied into src/ with its imports fixed as step 1 says', () => {
    symlinkSync(
      nodeModulesWithTsc(),
      path.join(scratch, 'node_modules'),
      'dir',
    );
    writeFileSync(path.join(scratch, 'package.json'), '{ "type": "module" }\n');
    const include: string[] = [];
    for (const example of EXAMPLES) {
      const dir = path.join(ROOT, 'examples', example);
      const readme = readFileSync(path.join(dir, 'README.md'), 'utf8');
      const src = path.join(scratch, example, 'src');
      mkdirSync(src, { recursive: true });
      copyFileSync(
        path.join(ROOT, 'test/fixtures/example-job.ts.txt'),
        path.join(src, 'job.ts'),
      );
      const { files, fixes } = stepOne(readme);
      for (const file of files) {
        let code = readFileSync(path.join(dir, file), 'utf8');
        for (const [from, to] of fixes) {
          code = code.replaceAll(`'${from}'`, `'${to}'`);
        }
        writeFileSync(path.join(src, path.basename(file)), code);
      }
      writeFileSync(path.join(src, 'jobs.ts'), jobsBlock(readme) ?? '');
      include.push(`${example}/src`);
    }
    const { compilerOptions } = JSON.parse(
      readFileSync(path.join(ROOT, 'tsconfig.json'), 'utf8'),
    );
    writeFileSync(
      path.join(scratch, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { ...compilerOptions, noEmit: true },
        include,
      }),
    );

    const tsc = spawnSync(process.execPath, [TSC, '-p', scratch], {
      encoding: 'utf8',
    });

    assert.equal(tsc.status, 0, `${tsc.stdout}${tsc.stderr}`);
  });

  it("names each example's own test command, and its test files exist", () => {
    for (const example of EXAMPLES) {
      const readme = readFileSync(
        path.join(ROOT, 'examples', example, 'README.md'),
        'utf8',
      );
      const command =
        /^node scripts\/with-emulator\.ts -- node --test ((?:test\/\S+\.test\.ts ?)+)$/m.exec(
          readme,
        );
      assert.ok(
        command,
        `${example}: no "node scripts/with-emulator.ts -- node --test …" line`,
      );
      const files = (command[1] ?? '').trim().split(' ');
      assert.ok(
        files.some((f) => f.includes(example.split('-')[0] ?? example)),
        files.join(' '),
      );
      for (const file of files) {
        assert.ok(existsSync(path.join(ROOT, file)), `${example}: ${file}`);
      }
    }
  });
});
