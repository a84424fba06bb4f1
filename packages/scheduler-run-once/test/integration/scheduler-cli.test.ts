/**
 * `npm run scheduler` (`src/ops/scheduler.ts`) as a process against the function as a process: a
 * forced run (`--fire`) with `AUTH_MODE=verify-oidc`, where one environment serves both: the
 * function verifies tokens against `OIDC_CERTS_URL` (`src/config.ts`, `src/function.ts`), and the
 * Scheduler serves its key's certificates on that URL's port and signs every delivery. Also its
 * exit statuses for what it cannot do.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  deliver,
  type FunctionProcess,
  freePort,
  removeScratch,
  scheduled,
  startFunction,
} from '../fixtures/harness.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const JOB = 'cli_sleep50';

after(removeScratch);

/** Runs `node ops/scheduler.ts ...args` from the repository root with `env` added. */
function schedulerCommand(args: string[], env: Record<string, string>) {
  return spawnSync(process.execPath, ['src/ops/scheduler.ts', ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: {
      ...process.env,
      JOBS_MODULE: 'test/fixtures/jobs-scheduler-cli.ts',
      ...env,
    },
    timeout: 60_000,
  });
}

describe('npm run scheduler', () => {
  let fn: FunctionProcess;
  let env: Record<string, string>;

  before(async () => {
    env = {
      AUTH_MODE: 'verify-oidc',
      OIDC_AUDIENCE: 'https://scheduled-job.example',
      OIDC_INVOKERS: 'invoker@demo-project.iam.gserviceaccount.com',
      OIDC_CERTS_URL: `http://127.0.0.1:${await freePort()}/certs`,
    };
    fn = await startFunction({ env: { ...env, FAULT_JOB_IDS: JOB } });
  });
  after(() => fn.kill());

  it('--fire runs a forced run with a locally signed OIDC token the function accepts, and exits 0', async () => {
    const result = schedulerCommand(['--fire', JOB, '--url', fn.url], env);
    const unsigned = await deliver(fn.url, scheduled(JOB));

    assert.equal(result.status, 0, result.stdout + result.stderr);
    assert.match(
      result.stdout,
      new RegExp(
        `^\\S+Z {2}${JOB} {2}slot \\S+T\\d\\d:\\d\\d:00Z {2}attempt 1 \\(forced run\\) {2}200 processed `,
        'm',
      ),
    );
    assert.equal(fn.executions().filter((e) => e.event === 'end').length, 1);
    assert.equal(unsigned.status, 401, 'the function checks tokens');
  });

  it('--fire --without-schedule-time sends no ScheduleTime, and the function takes it as a forced run', () => {
    const result = schedulerCommand(
      ['--fire', JOB, '--without-schedule-time', '--url', fn.url],
      env,
    );

    assert.equal(result.status, 0, result.stdout + result.stderr);
    // A duplicate when the first --fire of this file keyed the same next slot's forced run.
    assert.match(
      result.stdout,
      new RegExp(
        `^\\S+Z {2}${JOB} {2}slot \\S+Z {2}attempt 1 \\(forced run, no ScheduleTime sent\\) {2}200 (processed|duplicate) `,
        'm',
      ),
    );
  });

  it('exits 2 for --without-schedule-time without --fire', () => {
    const result = schedulerCommand(['--without-schedule-time'], {});

    assert.equal(result.status, 2);
    assert.match(result.stderr, /--without-schedule-time goes with --fire JOB/);
  });

  it('exits 2 naming the declared jobs for a job that is not declared', () => {
    const result = schedulerCommand(
      ['--fire', 'nightly', '--url', fn.url],
      env,
    );

    assert.equal(result.status, 2);
    assert.match(
      result.stderr,
      /no job "nightly" is declared; declared: cli_sleep50/,
    );
  });

  it('exits 2 for a rate outside 0 to 1, before sending anything', () => {
    const result = schedulerCommand(['--drop-answers', '2'], {});

    assert.equal(result.status, 2);
    assert.match(result.stderr, /--drop-answers must be a number from 0 to 1/);
  });
});
