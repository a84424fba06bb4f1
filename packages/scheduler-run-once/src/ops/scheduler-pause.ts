/**
 * The Cloud Scheduler half of `npm run pause` / `npm run resume` (`ops/pause.ts`): the exact
 * `gcloud scheduler jobs pause|resume` command, run, or printed for someone who may run it.
 */
import { spawnSync } from 'node:child_process';

/** What the command names: the Scheduler job (the declared job's id), its region and project. */
export interface SchedulerJobRef {
  readonly jobId: string;
  readonly location: string;
  readonly project: string;
}

/**
 * The gcloud arguments that pause or resume the Scheduler job (`deploy.sh` names each Scheduler
 * job by its declared id, in `REGION`).
 *
 * @example schedulerPauseArgs('pause', { jobId: 'nightly-report', location: 'us-central1', project: 'p' })
 * // ['scheduler', 'jobs', 'pause', 'nightly-report', '--location=us-central1', '--project=p']
 */
export function schedulerPauseArgs(
  verb: 'pause' | 'resume',
  ref: SchedulerJobRef,
): string[] {
  return [
    'scheduler',
    'jobs',
    verb,
    ref.jobId,
    `--location=${ref.location}`,
    `--project=${ref.project}`,
  ];
}

/** A command line as a POSIX shell reads it back, each word quoted where it must be. */
export function shellLine(argv: readonly string[]): string {
  return argv
    .map((word) =>
      /^[\w@%+=:,./-]+$/.test(word)
        ? word
        : `'${word.replaceAll("'", "'\\''")}'`,
    )
    .join(' ');
}

/** What {@link runSchedulerCommand} did: whether the Scheduler job changed, and the line saying so. */
export interface SchedulerCommandResult {
  readonly changed: boolean;
  readonly message: string;
}

/**
 * Runs gcloud with `args` and says what happened: that it ran, or that it did not (gcloud missing,
 * no account, no permission: its last line of error) with the command to run where one may.
 */
export function runSchedulerCommand(
  verb: 'pause' | 'resume',
  args: readonly string[],
): SchedulerCommandResult {
  const line = shellLine(['gcloud', ...args]);
  const done = spawnSync('gcloud', args, { encoding: 'utf8', timeout: 60_000 });
  if (done.error === undefined && done.status === 0) {
    return { changed: true, message: `${verb}: ran ${line}` };
  }
  const why =
    done.error !== undefined
      ? `gcloud could not run (${done.error.message})`
      : `gcloud answered: ${(done.stderr ?? '').trim().split('\n').at(-1) || `exit ${done.status}`}`;
  const undone = verb === 'pause' ? 'paused' : 'resumed';
  const message = `${verb}: the Cloud Scheduler job was NOT ${undone}: ${why}. Run it with an account that holds roles/cloudscheduler.admin:\n  ${line}`;
  return { changed: false, message };
}
