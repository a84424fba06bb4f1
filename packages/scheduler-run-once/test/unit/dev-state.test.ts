/**
 * `src/dev/dev-state.ts`, the lock of `npm run dev` (`.run-once/dev.json`): the next start refuses
 * while the recorded dev runs, and after it died stops only the recorded children that still run
 * their recorded command line; a process that reused a recorded pid is left alone. Real processes
 * (`sleep`), each killed at the end.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import {
  commandLineOf,
  describeEarlierDev,
  reclaimEarlierDev,
  writeLock,
} from '../../src/dev/dev-state.ts';
import { waitFor } from '../../src/dev/local-processes.ts';

const started: number[] = [];
after(() => {
  for (const pid of started) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

/** A `sleep` of 60 s in a process group of its own, as dev starts its children. */
function sleeper(): number {
  const child = spawn('sleep', ['60'], { detached: true, stdio: 'ignore' });
  child.unref();
  assert.ok(child.pid !== undefined);
  started.push(child.pid);
  return child.pid;
}

/** The pid of a process that has exited: no process runs under it now. */
function deadPid(): number {
  const result = spawnSync('sh', ['-c', 'echo $$']);
  return Number(result.stdout.toString().trim());
}

function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), 'dev-state-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

describe('the lock of npm run dev', () => {
  it('stops the children a dead dev left running, naming them, and only those whose command line still matches', async () => {
    const dir = scratch();
    const ours = sleeper();
    const reused = sleeper();
    const devPid = deadPid();
    writeLock(dir, {
      pid: devPid,
      command: 'node dev.ts',
      startedAt: new Date().toISOString(),
      children: [
        {
          role: 'function',
          pid: ours,
          command: commandLineOf(ours) ?? '',
          port: 8080,
        },
        // Recorded as a function, but its pid now runs something else: a reused pid.
        { role: 'emulator', pid: reused, command: 'java CloudFirestore' },
      ],
    });

    const earlier = reclaimEarlierDev(dir);

    assert.equal(earlier.kind, 'crashed');
    assert.deepEqual(
      earlier.kind === 'crashed' ? earlier.stopped.map((c) => c.pid) : [],
      [ours],
    );
    assert.match(
      describeEarlierDev(earlier, dir),
      new RegExp(
        `earlier npm run dev \\(pid ${devPid}\\) ended without stopping its processes; stopped: function \\(pid ${ours}, port 8080\\)`,
      ),
    );
    await waitFor(
      'the recorded child to exit',
      () => (commandLineOf(ours) === undefined ? true : undefined),
      5_000,
    );
    assert.ok(
      commandLineOf(reused)?.startsWith('sleep'),
      'the process that reused a pid still runs',
    );
  });

  it('refuses while the recorded dev still runs, naming its pid and how to stop it', () => {
    const dir = scratch();
    const dev = sleeper();
    const child = sleeper();
    writeLock(dir, {
      pid: dev,
      command: commandLineOf(dev) ?? '',
      startedAt: new Date().toISOString(),
      children: [
        { role: 'function', pid: child, command: commandLineOf(child) ?? '' },
      ],
    });

    const earlier = reclaimEarlierDev(dir, () => {
      throw new Error('signalled a child of a running dev');
    });

    assert.deepEqual(earlier, { kind: 'running', pid: dev });
    assert.match(
      describeEarlierDev(earlier, dir),
      new RegExp(
        `another npm run dev \\(pid ${dev}\\) runs in this project .*Ctrl-C in its terminal, or kill ${dev}`,
      ),
    );
  });

  it('finds nothing without a lock', () => {
    assert.deepEqual(reclaimEarlierDev(scratch()), { kind: 'none' });
  });
});
