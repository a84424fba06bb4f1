/**
 * The harness itself: `npm run test:file`'s script line, run as npm runs it (`sh -c`), on a test
 * that hangs and leaves a handle open (`test/fixtures/hanging-test.ts`) ends, failed, in bounded
 * time: a per-test timeout (`TEST_TIMEOUT_MS`, short here) and `--test-force-exit`. The emulator
 * this suite runs on is named in `FIRESTORE_EMULATOR_HOST`, so the script starts none.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { ROOT } from '../../src/dev/local-processes.ts';

/** Kills the run if it has not ended by then: the failure this test looks for is a hang. */
const HANG_MS = 90_000;

/** `npm run test:file -- FILE` as npm runs it: the script line with `sh -c`, FILE appended. */
function testFile(
  file: string,
  extraEnv: NodeJS.ProcessEnv,
): Promise<{ code: number | null; output: string; elapsedMs: number }> {
  const scripts = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'))
    .scripts as Record<string, string>;
  const script = scripts['test:file'];
  if (script === undefined) {
    throw new Error('package.json has no test:file script');
  }
  // Without the runner's mark on this process, which makes a nested `node --test` run nothing.
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT;
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn('sh', ['-c', `${script} "$@"`, 'sh', file], {
      cwd: ROOT,
      // This Node first on PATH, as `npx -p node@24 -- npm run` has it.
      env: {
        ...env,
        ...extraEnv,
        PATH: `${dirname(process.execPath)}:${process.env.PATH}`,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      // A group of its own, so that a hang is killed whole: the run's processes hold its pipes.
      detached: true,
    });
    let output = '';
    const collect = (chunk: Buffer) => {
      output += chunk.toString('utf8');
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    const killer = setTimeout(
      () => process.kill(-(child.pid as number), 'SIGKILL'),
      HANG_MS,
    );
    child.on('close', (code) => {
      clearTimeout(killer);
      resolve({ code, output, elapsedMs: Date.now() - started });
    });
  });
}

describe('npm run test:file', () => {
  it('fails a test that hangs once its timeout has passed, and ends though the file left a handle open', async () => {
    const run = await testFile('test/fixtures/hanging-test.ts', {
      TEST_TIMEOUT_MS: '2000',
    });

    assert.equal(
      run.code,
      1,
      `ended with ${run.code} after ${run.elapsedMs} ms:\n${run.output}`,
    );
    assert.match(run.output, /test timed out after 2000ms/, run.output);
    assert.ok(run.elapsedMs < HANG_MS, `took ${run.elapsedMs} ms`);
  });
});
