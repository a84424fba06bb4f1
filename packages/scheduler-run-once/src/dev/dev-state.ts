/**
 * What `npm run dev` keeps in the project's `.run-once/` directory so that its next start can
 * recover from a crash (`kill -9`, a closed laptop, an out-of-memory kill) of this one:
 *
 * - `dev.json`, the lock: dev's own pid and command line, and each process group it started (the
 *   emulator, the function) with its leader's pid, command line and port. The next start reads it:
 *   a dev still alive is refused (two devs would fight over the port and the Scheduler's state);
 *   children of a dead dev still running are named and stopped, but only those whose pid still
 *   runs the recorded command line, so a process that reused a pid is never signalled.
 * - `scheduler.json`, the local Scheduler's pending deliveries (`ops/local-scheduler.ts`,
 *   {@link SchedulerState}), so retries and the crash window's slots are delivered after a restart.
 *
 * Process identity is read from `/proc/<pid>/cmdline` (Linux); elsewhere from `ps -o args=`.
 */
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import type {
  SchedulerState,
  SchedulerStateStore,
} from '../ops/local-scheduler.ts';

/** The directory of dev's state, under the project: gitignored and left out of the upload. */
export const STATE_DIR_NAME = '.run-once';

/** One process group dev started, as recorded in the lock. */
export interface RecordedProcess {
  /** What it is: `emulator` or `function`. */
  readonly role: string;
  /** The group leader's pid, which is also the group id (`spawnGroup` detaches it). */
  readonly pid: number;
  /** Its command line as `/proc/<pid>/cmdline` read it at start (arguments joined by spaces). */
  readonly command: string;
  /** The TCP port it listens on, on 127.0.0.1. */
  readonly port?: number;
}

/** The lock file's content (`dev.json`). */
export interface DevLock {
  readonly pid: number;
  readonly command: string;
  /** When dev started, ISO 8601. */
  readonly startedAt: string;
  readonly children: readonly RecordedProcess[];
}

/** The state directory of the project in `projectDir`. */
export function stateDir(projectDir: string): string {
  return join(projectDir, STATE_DIR_NAME);
}

/**
 * The command line of process `pid` (arguments joined by spaces), or undefined when no such
 * process runs (or it is a zombie: exited, waiting to be reaped).
 */
export function commandLineOf(pid: number): string | undefined {
  if (!Number.isInteger(pid) || pid <= 0) {
    return undefined;
  }
  if (existsSync('/proc/self/cmdline')) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (/^\d+ \(.*\) Z /.test(stat)) {
        return undefined;
      }
      const raw = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      return raw.split('\0').filter(Boolean).join(' ');
    } catch {
      return undefined;
    }
  }
  const ps = spawnSync('ps', ['-o', 'args=', '-p', String(pid)], {
    encoding: 'utf8',
  });
  const line = ps.status === 0 ? ps.stdout.trim() : '';
  return line === '' ? undefined : line;
}

/** Whether `recorded` still runs as recorded: same pid, same command line. */
export function stillRuns(recorded: { pid: number; command: string }): boolean {
  return commandLineOf(recorded.pid) === recorded.command;
}

/** Reads the lock in `dir`; undefined when there is none or it cannot be read as one. */
export function readLock(dir: string): DevLock | undefined {
  try {
    const lock = JSON.parse(
      readFileSync(join(dir, 'dev.json'), 'utf8'),
    ) as DevLock;
    return typeof lock.pid === 'number' && Array.isArray(lock.children)
      ? lock
      : undefined;
  } catch {
    return undefined;
  }
}

/** Writes `value` as JSON to `file` atomically (a crash mid-write leaves the previous file). */
export function writeJsonAtomically(file: string, value: unknown): void {
  const dir = join(file, '..');
  mkdirSync(dir, { recursive: true });
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(value, null, 2)}\n`);
  renameSync(temporary, file);
}

/** Writes the lock into `dir`. */
export function writeLock(dir: string, lock: DevLock): void {
  writeJsonAtomically(join(dir, 'dev.json'), lock);
}

/** Removes the lock from `dir` (a clean exit). */
export function removeLock(dir: string): void {
  rmSync(join(dir, 'dev.json'), { force: true });
}

/** What the next start found of an earlier dev. */
export type EarlierDev =
  | { readonly kind: 'none' }
  /** That dev still runs: this start must not. */
  | { readonly kind: 'running'; readonly pid: number }
  /** That dev is gone; `stopped` are its children that still ran, now signalled. */
  | {
      readonly kind: 'crashed';
      readonly pid: number;
      readonly stopped: readonly RecordedProcess[];
    };

/**
 * Looks for an earlier dev in `dir`'s lock: refuses nothing itself, but stops (SIGKILL to its
 * process group) every recorded child of a dead dev that still runs its recorded command line.
 * `signal` is how a group is signalled (tests watch it).
 */
export function reclaimEarlierDev(
  dir: string,
  signal: (pgid: number) => void = (pgid) => process.kill(-pgid, 'SIGKILL'),
): EarlierDev {
  const lock = readLock(dir);
  if (lock === undefined || lock.pid === process.pid) {
    return { kind: 'none' };
  }
  if (stillRuns(lock)) {
    return { kind: 'running', pid: lock.pid };
  }
  const stopped: RecordedProcess[] = [];
  for (const child of lock.children) {
    if (!stillRuns(child)) {
      continue; // gone, or its pid now runs something else: not ours to stop
    }
    try {
      signal(child.pid);
      stopped.push(child);
    } catch {
      // exited meanwhile
    }
  }
  return { kind: 'crashed', pid: lock.pid, stopped };
}

/** The lines the next start prints about `earlier`; none for `none`. */
export function describeEarlierDev(earlier: EarlierDev, dir: string): string {
  if (earlier.kind === 'running') {
    return `another npm run dev (pid ${earlier.pid}) runs in this project (${join(dir, 'dev.json')}): stop it with Ctrl-C in its terminal, or kill ${earlier.pid}`;
  }
  if (earlier.kind === 'crashed') {
    const named = earlier.stopped.map(
      (child) =>
        `${child.role} (pid ${child.pid}${child.port === undefined ? '' : `, port ${child.port}`})`,
    );
    return named.length === 0
      ? `an earlier npm run dev (pid ${earlier.pid}) ended without stopping; nothing of it was still running`
      : `an earlier npm run dev (pid ${earlier.pid}) ended without stopping its processes; stopped: ${named.join(', ')}`;
  }
  return '';
}

/**
 * The local Scheduler's state kept in `dir`'s `scheduler.json` (written atomically at every change:
 * a crash loses nothing it had owed). A file that cannot be read as one counts as none.
 */
export function schedulerStateFile(dir: string): SchedulerStateStore {
  const file = join(dir, 'scheduler.json');
  return {
    load() {
      try {
        const state = JSON.parse(readFileSync(file, 'utf8')) as SchedulerState;
        return typeof state.lastSlots === 'object' &&
          Array.isArray(state.retries)
          ? state
          : undefined;
      } catch {
        return undefined;
      }
    },
    save(state) {
      writeJsonAtomically(file, state);
    },
  };
}
