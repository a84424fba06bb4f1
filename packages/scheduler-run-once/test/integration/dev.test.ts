/**
 * `npm run dev` (`src/dev/dev.ts`) as a process: it serves a function on the emulator the tests
 * share, its local Scheduler fires a declared job at once (`--fire`), the delivery shows as one
 * `scheduler …` line and the function's log lines show readable, and Ctrl-C (SIGINT) stops it all
 * with status 0; its history page serves the `runs --html` page of that emulator. The jobs are a
 * test's (`JOBS_MODULE=test/fixtures/jobs-one.ts`, served by `test/fixtures/dev-function.ts`
 * through `--source`/`--target`), never the user's: replacing `src/job.ts` changes nothing here.
 * `--no-watch` leaves src/ alone. What its processes listen on is read from /proc (Linux): every
 * socket on 127.0.0.1 unless `--host` asks otherwise.
 */
import assert from 'node:assert/strict';
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Firestore } from '@google-cloud/firestore';
import { stillRuns } from '../../src/dev/dev-state.ts';
import {
  freePort,
  type GroupProcess,
  ROOT,
  spawnGroup,
  waitFor,
  within,
} from '../../src/dev/local-processes.ts';
import { jobs } from '../fixtures/jobs-one.ts';

const START_MS = 60_000;
/** How long npm run dev may take to stop once signalled. */
const STOP_MS = 30_000;

/** `/proc/net/tcp*`'s hex address (`0100007F:1F90`, or 32 hex digits for IPv6) as `address:port`. */
function decodeAddress(hex: string): string {
  const [ip = '', port = ''] = hex.split(':');
  const words = (ip.match(/.{8}/g) ?? []).map((w) =>
    (w.match(/../g) ?? []).reverse().join(''),
  );
  const bytes =
    words
      .join('')
      .match(/../g)
      ?.map((b) => Number.parseInt(b, 16)) ?? [];
  const address =
    bytes.length === 4
      ? bytes.join('.')
      : bytes.slice(0, 12).join(',') === '0,0,0,0,0,0,0,0,0,0,255,255'
        ? `::ffff:${bytes.slice(12).join('.')}`
        : (words.join('').match(/.{4}/g) ?? [])
            .map((g) => Number.parseInt(g, 16).toString(16))
            .join(':');
  return `${address}:${Number.parseInt(port, 16)}`;
}

/** The listening TCP sockets of the machine, by socket inode. */
function listeningSockets(): Map<string, string> {
  const sockets = new Map<string, string>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    if (!existsSync(file)) {
      continue;
    }
    for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields[3] === '0A' && fields[1] && fields[9]) {
        sockets.set(fields[9], decodeAddress(fields[1]));
      }
    }
  }
  return sockets;
}

/** `pid` and every process below it, from /proc's children lists. */
function processTree(pid: number): number[] {
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) {
    for (const task of entriesOf(`/proc/${tree[i]}/task`)) {
      const children = contentOf(`/proc/${tree[i]}/task/${task}/children`);
      if (children !== '') {
        tree.push(...children.split(' ').map(Number));
      }
    }
  }
  return tree;
}

/**
 * A /proc directory's entries, or none once its process is gone: a process or thread may end
 * between two reads (a starting `npm run dev` spawns and reaps them all the time).
 */
function entriesOf(directory: string): string[] {
  try {
    return readdirSync(directory);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      return [];
    }
    throw err;
  }
}

/** A /proc file's content, trimmed, or `''` once its thread is gone (see {@link entriesOf}). */
function contentOf(file: string): string {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      return '';
    }
    throw err;
  }
}

/** What the processes `pids` listen on, `address:port` each. */
function listenersOf(pids: readonly number[]): string[] {
  const sockets = listeningSockets();
  const found: string[] = [];
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue; // gone, or not ours
    }
    for (const fd of fds) {
      let target: string;
      try {
        target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      const address = inode === undefined ? undefined : sockets.get(inode);
      if (address !== undefined) {
        found.push(address);
      }
    }
  }
  return found;
}

/** The pid listening on 127.0.0.1:`port`, found by its socket's inode. */
function pidListeningOn(port: number): number | undefined {
  const inodes = new Set(
    [...listeningSockets()]
      .filter(([, a]) => a.endsWith(`:${port}`))
      .map(([inode]) => inode),
  );
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) {
      continue;
    }
    try {
      for (const fd of readdirSync(`/proc/${entry}/fd`)) {
        const inode = /^socket:\[(\d+)\]$/.exec(
          readlinkSync(`/proc/${entry}/fd/${fd}`),
        )?.[1];
        if (inode !== undefined && inodes.has(inode)) {
          return Number(entry);
        }
      }
    } catch {
      // not ours to read
    }
  }
  return undefined;
}

/** Those of `pids` still running (a zombie has exited: it only waits to be reaped). */
function alive(pids: readonly number[]): number[] {
  return pids.filter((pid) => {
    try {
      return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    } catch {
      return false; // gone
    }
  });
}

/**
 * Signals npm run dev's group as a terminal does (`signal`), waits for it to exit and for every
 * process of `tree` (its processes, read while it ran) to be gone; kills what is left either way,
 * so a failing test leaks nothing.
 */
async function stopDev(
  dev: GroupProcess,
  tree: readonly number[],
  signal: NodeJS.Signals,
) {
  try {
    dev.signalGroup(signal);
    await within(dev.exited, STOP_MS, `npm run dev to exit on ${signal}`);
    await waitFor(
      'every process npm run dev started to exit',
      () => alive(tree).length === 0 || undefined,
      STOP_MS,
    ).catch((err: Error) => {
      throw new Error(
        `${err.message}; still running: ${alive(tree).join(', ')}`,
      );
    });
  } finally {
    dev.signalGroup('SIGKILL');
    for (const pid of alive(tree)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
  }
}

/**
 * `npm run dev` serving the test's function on `port` (jobs-one), with `args`; `env` on top of
 * this process's (a variable set to undefined is removed).
 */
function startDev(
  port: number,
  args: string[],
  env: Record<string, string | undefined> = {},
): GroupProcess {
  return spawnGroup(
    process.execPath,
    [
      'src/dev/dev.ts',
      ...args,
      '--no-watch',
      '--no-build',
      '--source',
      'test/fixtures/dev-function.ts',
      '--target',
      'devFunction',
    ],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        PORT: String(port),
        JOBS_MODULE: 'test/fixtures/jobs-one.ts',
        ...env,
      },
    },
  );
}

const LOOPBACK =
  /^(127\.\d+\.\d+\.\d+|::ffff:127\.\d+\.\d+\.\d+|0:0:0:0:0:0:0:1):\d+$/;
const HAS_PROC = existsSync('/proc/net/tcp');

describe('npm run dev', () => {
  it('fires a declared job through its local Scheduler, shows readable logs and a history page, and stops on Ctrl-C', async () => {
    const port = await freePort();
    const id = jobs[0]?.id ?? 'scheduled-job';
    const dev = startDev(port, ['--fire', id]);
    let tree: number[] = [];

    try {
      await waitFor(
        'a scheduler line for the forced run',
        () => {
          if (!dev.running()) {
            throw new Error(`dev exited:\n${dev.output()}`);
          }
          return (
            /^scheduler {2}.* attempt 1 \(forced run\) /m.test(dev.output()) ||
            undefined
          );
        },
        START_MS,
      );
      const pageUrl = /^dev: run history page: (http:\S+)/m.exec(
        dev.output(),
      )?.[1];
      assert.ok(pageUrl, dev.output());
      const page = await fetch(pageUrl, {
        signal: AbortSignal.timeout(30_000),
      });
      const html = await page.text();
      assert.equal(page.status, 200, html);
      assert.match(html, new RegExp(`<h2>${id}</h2>`));
      assert.match(html, /data-state="/);
      const refused = await fetch(`${pageUrl}?since=yesterday`);
      assert.equal(refused.status, 400);
      await refused.text();
      tree = HAS_PROC && dev.pid !== undefined ? processTree(dev.pid) : [];
      if (HAS_PROC && dev.pid !== undefined) {
        const listening = listenersOf(tree);
        assert.ok(
          listening.includes(`127.0.0.1:${port}`),
          listening.join(', '),
        );
        assert.ok(
          listening.includes(new URL(pageUrl).host),
          listening.join(', '),
        );
        const beyond = listening.filter((address) => !LOOPBACK.test(address));
        assert.deepEqual(
          beyond,
          [],
          'nothing npm run dev started listens beyond 127.0.0.1',
        );
      }
    } finally {
      await stopDev(dev, tree, 'SIGINT');
    }

    const output = dev.output();
    assert.match(
      output,
      new RegExp(
        `^scheduler {2}\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z {2}${id} +slot \\S+Z {2}attempt 1 `,
        'm',
      ),
    );
    assert.match(
      output,
      /^\d\d:\d\d:\d\d\.\d{3}Z INFO: scheduled run: processed \{/m,
    );
    assert.doesNotMatch(
      output,
      /^\{"severity"/m,
      'no raw JSON log lines on the terminal',
    );
    assert.match(output, /^dev: stopping$/m);
    assert.equal(dev.exitCode, 0, output);
  });

  it('binds the function and the history page elsewhere only with --host, and warns', async (t) => {
    if (!HAS_PROC) {
      return t.skip('reads /proc/net/tcp (Linux)');
    }
    const port = await freePort();
    const dev = startDev(port, ['--host', '0.0.0.0', '--no-scheduler']);
    let tree: number[] = [];
    try {
      const pageUrl = await waitFor(
        'the history page line',
        () => {
          if (!dev.running()) {
            throw new Error(`dev exited:\n${dev.output()}`);
          }
          return /^dev: run history page: (http:\S+)/m.exec(dev.output())?.[1];
        },
        START_MS,
      );
      tree = processTree(dev.pid ?? 0);
      const listening = listenersOf(tree);
      assert.ok(listening.includes(`0.0.0.0:${port}`), listening.join(', '));
      assert.ok(
        listening.includes(`0.0.0.0:${new URL(pageUrl).port}`),
        listening.join(', '),
      );
      assert.match(
        dev.output(),
        /^dev: WARNING: --host 0\.0\.0\.0: .*can run your jobs unauthenticated/m,
      );
    } finally {
      await stopDev(dev, tree, 'SIGTERM');
    }
  });

  it('stops every process it started on Ctrl-C while it is still starting', async (t) => {
    if (!HAS_PROC) {
      return t.skip('reads /proc (Linux)');
    }
    const dev = startDev(await freePort(), ['--no-scheduler']);
    let tree: number[] = [];
    try {
      // The function has been spawned, and npm run dev still waits for it to listen.
      tree = await waitFor(
        'npm run dev to start the function',
        () => {
          if (!dev.running()) {
            throw new Error(`dev exited:\n${dev.output()}`);
          }
          const pids = processTree(dev.pid ?? 0);
          const spawned = pids.some((pid) => {
            try {
              return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(
                '--target=devFunction',
              );
            } catch {
              return false;
            }
          });
          return spawned ? pids : undefined;
        },
        START_MS,
        10,
      );
      assert.doesNotMatch(
        dev.output(),
        /^dev: function handleScheduledJob on/m,
        'still starting',
      );
    } finally {
      await stopDev(dev, tree, 'SIGINT');
    }

    assert.ok(tree.length > 1, `no process of its own: ${tree.join(', ')}`);
    assert.match(
      dev.output(),
      /^dev: stopping \(interrupted while starting\)$/m,
    );
  });

  it('after a kill -9, the next start stops the function it left running, naming it; a start beside a running dev is refused', async (t) => {
    if (!HAS_PROC) {
      return t.skip('reads /proc (Linux)');
    }
    const port = await freePort();
    const functionStarted = (dev: GroupProcess) => () => {
      if (!dev.running()) {
        throw new Error(`dev exited:\n${dev.output()}`);
      }
      return /^dev: function handleScheduledJob on/m.test(dev.output())
        ? true
        : undefined;
    };
    const first = startDev(port, ['--no-scheduler']);
    let tree: number[] = [];
    let next: GroupProcess | undefined;
    try {
      await waitFor('the first dev to serve', functionStarted(first), START_MS);
      tree = processTree(first.pid ?? 0);
      const lock = JSON.parse(
        readFileSync(`${ROOT}/.run-once/dev.json`, 'utf8'),
      ) as {
        pid: number;
        children: { role: string; pid: number; port: number }[];
      };
      assert.equal(lock.pid, first.pid);
      const fn = lock.children.find((c) => c.role === 'function');
      assert.equal(fn?.port, port);

      const beside = startDev(await freePort(), ['--no-scheduler']);
      await within(beside.exited, START_MS, 'a second dev to refuse');
      assert.equal(beside.exitCode, 1, beside.output());
      assert.match(
        beside.output(),
        new RegExp(
          `another npm run dev \\(pid ${first.pid}\\) runs in this project`,
        ),
      );

      // kill -9 of dev alone: its function, in a group of its own, keeps serving.
      process.kill(first.pid ?? 0, 'SIGKILL');
      await within(first.exited, STOP_MS, 'the first dev to die');
      assert.deepEqual(
        alive([fn?.pid ?? 0]),
        [fn?.pid],
        'the function outlived it',
      );

      next = startDev(port, ['--no-scheduler']);
      await waitFor('the next dev to serve', functionStarted(next), START_MS);
      assert.match(
        next.output(),
        new RegExp(
          `^dev: an earlier npm run dev \\(pid ${first.pid}\\) ended without stopping its processes; stopped: function \\(pid ${fn?.pid}, port ${port}\\)$`,
          'm',
        ),
      );
      assert.doesNotMatch(next.output(), /port \d+ is taken/);
      assert.deepEqual(alive([fn?.pid ?? 0]), [], 'the old function is gone');
    } finally {
      first.signalGroup('SIGKILL');
      for (const pid of alive(tree)) {
        process.kill(pid, 'SIGKILL');
      }
      if (next !== undefined) {
        await stopDev(next, processTree(next.pid ?? 0), 'SIGINT');
      }
    }
    assert.equal(
      existsSync(`${ROOT}/.run-once/dev.json`),
      false,
      'a clean stop removes the lock',
    );
  });

  it('with --keep-data, exports the emulator every interval, so after a kill -9 the next start stops the old emulator and imports the data', async (t) => {
    if (!HAS_PROC) {
      return t.skip('reads /proc (Linux)');
    }
    const port = await freePort();
    const id = jobs[0]?.id ?? 'scheduled-job';
    const dataDir = mkdtempSync(join(tmpdir(), 'dev-keep-data-'));
    const metadata = join(
      dataDir,
      'firestore',
      'firestore.overall_export_metadata',
    );
    const ownEmulator = {
      FIRESTORE_EMULATOR_HOST: undefined,
      RUN_ONCE_DEV_EXPORT_SECONDS: '1',
    };
    const first = startDev(
      port,
      ['--keep-data', '--data-dir', dataDir, '--fire', id],
      ownEmulator,
    );
    let leftovers: { pid: number; command: string }[] = [];
    let tree: number[] = [];
    let next: GroupProcess | undefined;
    try {
      await waitFor(
        'the forced run to be processed',
        () => {
          if (!first.running()) {
            throw new Error(`dev exited:\n${first.output()}`);
          }
          return (
            /INFO: scheduled run: processed/.test(first.output()) || undefined
          );
        },
        START_MS,
      );
      tree = processTree(first.pid ?? 0);
      leftovers = (
        JSON.parse(readFileSync(`${ROOT}/.run-once/dev.json`, 'utf8')) as {
          children: { pid: number; command: string }[];
        }
      ).children;
      // An export holding the run, with no Ctrl-C: a periodic one.
      const exported = join(
        dataDir,
        'firestore',
        'all_namespaces',
        'all_kinds',
        'output-0',
      );
      await waitFor(
        'an export holding the run',
        () =>
          (existsSync(metadata) &&
            existsSync(exported) &&
            readFileSync(exported).includes(id)) ||
          undefined,
        20_000,
      );
      process.kill(first.pid ?? 0, 'SIGKILL');
      await within(first.exited, STOP_MS, 'the first dev to die');

      next = startDev(
        port,
        ['--keep-data', '--data-dir', dataDir, '--no-scheduler'],
        ownEmulator,
      );
      const emulatorHost = await waitFor(
        'the next dev to serve',
        () => {
          if (!next?.running()) {
            throw new Error(`dev exited:\n${next?.output()}`);
          }
          return /^dev: function handleScheduledJob on/m.test(next.output())
            ? /^dev: Firestore emulator on (\S+), with the data saved in/m.exec(
                next.output(),
              )?.[1]
            : undefined;
        },
        START_MS,
      );
      assert.match(
        next.output(),
        /stopped: emulator \(pid \d+, port \d+\), function \(pid \d+, port \d+\)/,
      );
      const project = /GOOGLE_CLOUD_PROJECT=(\S+)/.exec(next.output())?.[1];
      // FIRESTORE_EMULATOR_HOST (the tests' shared emulator) would win over `host` in the client's
      // constructor: set it to this dev's emulator while constructing.
      const shared = process.env.FIRESTORE_EMULATOR_HOST;
      process.env.FIRESTORE_EMULATOR_HOST = emulatorHost;
      const db = new Firestore({ projectId: project, ssl: false });
      if (shared === undefined) {
        delete process.env.FIRESTORE_EMULATOR_HOST;
      } else {
        process.env.FIRESTORE_EMULATOR_HOST = shared;
      }
      try {
        const collections = await db.listCollections();
        const ids = collections.map((c) => c.id);
        const withRuns = await Promise.all(
          collections.map(async (c) => (await c.limit(1).get()).size),
        );
        assert.ok(
          withRuns.some((size) => size > 0),
          `the run's documents were imported: ${JSON.stringify(ids)}`,
        );
      } finally {
        await db.terminate();
      }
    } finally {
      first.signalGroup('SIGKILL');
      for (const pid of alive(tree)) {
        process.kill(pid, 'SIGKILL');
      }
      for (const child of leftovers) {
        if (stillRuns(child)) {
          process.kill(-child.pid, 'SIGKILL');
        }
      }
      if (next !== undefined) {
        await stopDev(next, processTree(next.pid ?? 0), 'SIGINT');
      }
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('shares an emulator that, as npm run dev starts one, listens on 127.0.0.1 only', (t) => {
    const emulatorPort = Number(
      URL.parse(`http://${process.env.FIRESTORE_EMULATOR_HOST}`)?.port,
    );
    const pid =
      HAS_PROC && emulatorPort > 0 ? pidListeningOn(emulatorPort) : undefined;
    if (pid === undefined) {
      return t.skip('no emulator process of ours to read in /proc');
    }
    const listening = listenersOf([pid]);
    assert.ok(listening.length > 0);
    assert.deepEqual(
      listening.filter((address) => !LOOPBACK.test(address)),
      [],
      listening.join(', '),
    );
  });
});
