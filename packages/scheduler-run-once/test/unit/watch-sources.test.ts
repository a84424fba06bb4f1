/**
 * `src/dev/watch-sources.ts`, the watch of `npm run dev`, on a scratch directory: a change in a
 * subfolder of `src/` (issue 43: the watch of `src/` alone missed them) is reported, once per burst;
 * changes under `node_modules/`, build output and dev's state are not.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { sleep, waitFor } from '../../src/dev/local-processes.ts';
import { ignoredChange, watchSources } from '../../src/dev/watch-sources.ts';

const QUIET_MS = 200;
/** How long a change may take to be reported on a loaded machine. */
const REPORT_MS = 10_000;

function scratchSrc(): string {
  const dir = mkdtempSync(join(tmpdir(), 'watch-sources-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const src = join(dir, 'src');
  mkdirSync(join(src, 'jobs', 'nightly'), { recursive: true });
  mkdirSync(join(src, 'node_modules', 'x'), { recursive: true });
  mkdirSync(join(src, 'build'), { recursive: true });
  return src;
}

describe('watchSources', () => {
  it('reports a change two folders down, once per burst, and not one under node_modules or build output', async () => {
    const src = scratchSrc();
    const reported: string[] = [];
    const stop = watchSources(
      [{ dir: src, label: 'src/' }],
      (changed) => reported.push(changed),
      QUIET_MS,
    );
    after(stop);
    // The watches are set up asynchronously: touch a probe until it is seen, then start afresh.
    await waitFor(
      'the watch to see a probe',
      () => {
        writeFileSync(join(src, 'probe.ts'), String(Date.now()));
        return reported.length > 0 ? true : undefined;
      },
      REPORT_MS,
      2 * QUIET_MS,
    );
    await waitFor(
      'the probe to be reported once more at most',
      async () => {
        const before = reported.length;
        await sleep(2 * QUIET_MS);
        return reported.length === before ? true : undefined;
      },
      REPORT_MS,
      0,
    );
    reported.length = 0;

    writeFileSync(join(src, 'node_modules', 'x', 'index.js'), 'ignored');
    writeFileSync(join(src, 'build', 'job.js'), 'ignored');
    for (let i = 0; i < 3; i++) {
      writeFileSync(join(src, 'jobs', 'nightly', 'report.ts'), `// ${i}`);
    }
    await waitFor(
      'a reported change',
      () => (reported.length > 0 ? true : undefined),
      REPORT_MS,
    );

    assert.deepEqual(reported, ['src/jobs/nightly/report.ts']);

    // A folder made after the watch started is watched too.
    mkdirSync(join(src, 'later'));
    await waitFor(
      'a change in the new folder',
      () => {
        writeFileSync(join(src, 'later', 'job.ts'), String(Date.now()));
        return reported.some((r) => r === 'src/later/job.ts') || undefined;
      },
      REPORT_MS,
      2 * QUIET_MS,
    );
  });

  it('ignores dependencies, build output, dev state and editor temporaries', () => {
    for (const path of [
      'node_modules/a/b.js',
      'dist/index.js',
      'build/job.js',
      '.run-once/dev.json',
      'sub/.job.ts.swp',
      'job.ts~',
      '4913',
    ]) {
      assert.equal(ignoredChange(path), true, path);
    }
    for (const path of ['job.ts', 'jobs/nightly/report.ts', 'builder.ts']) {
      assert.equal(ignoredChange(path), false, path);
    }
  });
});
