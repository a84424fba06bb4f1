/**
 * `src/dev/local-processes.ts` as a process: the process groups it started die with it when a
 * signal it has no handler for ends it, as Ctrl-C of `npm test` ends a test file; the function
 * processes a test file started lead groups of their own, so the signal never reaches them.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import {
  ROOT,
  spawnGroup,
  waitFor,
  within,
} from '../../src/dev/local-processes.ts';

/** Starts a group (`sleep 300`), prints its pid, and waits forever. */
const HOLDER = [
  `import { spawnGroup } from ${JSON.stringify(pathToFileURL(path.join(ROOT, 'src/dev/local-processes.ts')).href)};`,
  "console.log(spawnGroup('sleep', ['300']).pid);",
  'setInterval(() => {}, 60_000);',
].join('\n');

/** Whether `pid` runs (a zombie has exited: it only waits to be reaped). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

describe('a process that started process groups', () => {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    it(`takes them with it when ${signal} ends it`, async () => {
      const holder = spawnGroup(
        process.execPath,
        ['--input-type=module', '-e', HOLDER],
        {
          cwd: ROOT,
        },
      );
      let sleeper = 0;
      try {
        sleeper = Number(
          await waitFor(
            'the holder to start its group',
            () => {
              if (!holder.running()) {
                throw new Error(`the holder exited:\n${holder.output()}`);
              }
              return /^(\d+)$/m.exec(holder.output())?.[1];
            },
            30_000,
          ),
        );

        holder.signalGroup(signal);
        await within(holder.exited, 30_000, `the holder to end on ${signal}`);

        assert.equal(
          holder.signalCode,
          signal,
          'it dies of the signal, as without a handler',
        );
        await waitFor(
          `its group's sleep ${sleeper} to be killed`,
          () => !running(sleeper) || undefined,
          10_000,
        );
      } finally {
        holder.signalGroup('SIGKILL');
        if (sleeper > 0 && running(sleeper)) {
          process.kill(-sleeper, 'SIGKILL');
        }
      }
    });
  }
});
