/**
 * Job declarations: defaults, the cold-start check that lists every problem of every job at once,
 * and finding the declared job a delivery names. Pure and in-process.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/core/errors.ts';
import {
  defineJob,
  findJob,
  JOB_DEFAULTS,
  type JobDeclaration,
  jobInfoOf,
  validateJobs,
} from '../../src/policy/job-declaration.ts';
import { jobIdOf } from '../../src/policy/job-id.ts';
import { jobs as starterJobs } from '../fixtures/starter/src/jobs.ts';

const run = () => {};

/** The ConfigError validateJobs throws for `declarations`; fails the test if it accepts them. */
function refusalOf(declarations: readonly unknown[]): ConfigError {
  try {
    validateJobs(declarations as JobDeclaration[]);
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return err;
  }
  assert.fail('validateJobs accepted the declarations');
}

const problemsOf = (declarations: readonly unknown[]) =>
  refusalOf(declarations).problems;

describe('validateJobs', () => {
  it('fills in every default and normalises the schedule', () => {
    const [job] = validateJobs([
      defineJob({ id: 'hourly', schedule: '0  * * * *', run }),
    ]);

    assert.deepEqual(
      { ...job, run: undefined },
      {
        id: 'hourly',
        schedule: '0 * * * *',
        ...JOB_DEFAULTS,
        run: undefined,
      },
    );
    assert.equal(job?.run, run);
  });

  it('keeps every setting that is given', () => {
    const declaration = {
      id: 'nightly',
      schedule: '0 2 * * *',
      timeZone: 'Europe/Berlin',
      attemptDeadlineSeconds: 1800,
      retryCount: 0,
      maxRetryDurationSeconds: 0,
      minBackoffSeconds: 5,
      maxBackoffSeconds: 5,
      maxDoublings: 0,
      overlap: 'skip' as const,
      run,
    };

    const [job] = validateJobs([declaration]);

    assert.deepEqual(job, declaration);
  });

  it('returns frozen jobs in a frozen list, in declaration order', () => {
    const jobs = validateJobs([
      defineJob({ id: 'b', schedule: '0 * * * *', run }),
      defineJob({ id: 'a', schedule: '0 * * * *', run }),
    ]);

    assert.deepEqual(
      jobs.map((j) => j.id),
      ['b', 'a'],
    );
    assert.ok(Object.isFrozen(jobs));
    assert.ok(jobs.every((j) => Object.isFrozen(j)));
  });

  it('reports every problem of every job in one ConfigError', () => {
    const problems = problemsOf([
      { id: 'bad id!', schedule: 'every 5 minutes', run },
      { id: 'twice', schedule: '0 * * * *', timeZone: 'Mars/Base', run },
      { id: 'twice', schedule: '0 0 L * *', attemptDeadlineSeconds: 10, run },
      {
        id: 'retries',
        schedule: '0 * * * *',
        retryCount: 6,
        minBackoffSeconds: 700,
        maxDoublings: 1.5,
        run,
      },
      { id: 'no-run', schedule: '0 * * * *' },
      null,
    ]);

    const expected = [
      /^job "bad id!" \(jobs\[0\]\): id "bad id!" must be 1-500 letters, digits, "-" or "_"/,
      /^job "bad id!" \(jobs\[0\]\): schedule "every 5 minutes" must be a unix-cron schedule .*X-CloudScheduler-ScheduleTime/,
      /^job "twice" \(jobs\[1\]\): timeZone "Mars\/Base" is not a time zone/,
      /^job "twice" \(jobs\[2\]\): id "twice" is already declared by jobs\[1\]/,
      /^job "twice" \(jobs\[2\]\): schedule "0 0 L \* \*" day of month field "L"/,
      /^job "twice" \(jobs\[2\]\): attemptDeadlineSeconds 10 must be a whole number from 15 to 1800/,
      /^job "retries" \(jobs\[3\]\): retryCount 6 must be a whole number from 0 to 5/,
      /^job "retries" \(jobs\[3\]\): maxDoublings 1.5 must be a whole number from 0 to 999/,
      /^job "retries" \(jobs\[3\]\): minBackoffSeconds \(700\) must not exceed maxBackoffSeconds \(600\)/,
      /^job "no-run" \(jobs\[4\]\): run must be the job function/,
      /^jobs\[5\]: is not a job declaration/,
    ];
    for (const pattern of expected) {
      assert.ok(
        problems.some((p) => pattern.test(p)),
        `${pattern} not in:\n${problems.join('\n')}`,
      );
    }
    assert.equal(problems.length, expected.length, problems.join('\n'));
  });

  it('says so in the message, one problem per line', () => {
    const error = refusalOf([
      defineJob({ id: 'a', schedule: 'every day', run }),
      defineJob({ id: 'b', schedule: '0 * * * *', timeZone: '+01:00', run }),
    ]);

    assert.match(
      error.message,
      /^Invalid configuration:\n {2}- job "a" .*\n {2}- job "b" .*UTC offset$/,
    );
  });

  it('names a job whose id holds control characters on one line, escaped', () => {
    const id = 'bad id\u001b[31m\nnext';
    const problems = problemsOf([
      defineJob({ id, schedule: '* * * * *', run }),
    ]);

    assert.ok(problems.length > 0);
    for (const problem of problems) {
      assert.ok(
        ![...problem].some((c) => c < ' ' || c === '\u007f'),
        JSON.stringify(problem),
      );
      assert.ok(
        problem.startsWith(`job ${JSON.stringify(id)} (jobs[0])`),
        problem,
      );
    }
  });

  it('says a missing schedule is required, and a schedule that is no string must be one', () => {
    const problems = problemsOf([
      { id: 'missing', run },
      { id: 'number', schedule: 5, run },
    ]);

    assert.ok(
      problems.includes('job "missing" (jobs[0]): schedule is required'),
      problems.join('\n'),
    );
    assert.ok(
      problems.includes(
        'job "number" (jobs[1]): schedule 5 must be a unix-cron string, e.g. "*/5 * * * *"',
      ),
      problems.join('\n'),
    );
  });

  it('refuses an empty list', () => {
    assert.deepEqual(problemsOf([]), [
      'no jobs are declared: src/jobs.ts must export at least one in `jobs`',
    ]);
  });

  it('accepts the jobs src/jobs.ts lists, whatever they are', () => {
    const jobs = validateJobs(starterJobs);

    assert.ok(jobs.length >= 1);
    assert.ok(jobs.every((job) => typeof job.run === 'function'));
  });
});

describe('findJob', () => {
  const jobs = validateJobs([
    defineJob({ id: 'nightly-report', schedule: '0 2 * * *', run }),
    defineJob({ id: 'every_five', schedule: '*/5 * * * *', run }),
  ]);

  it('finds a job by the short id Scheduler sends', () => {
    assert.equal(findJob(jobs, 'every_five')?.id, 'every_five');
  });

  it('finds the same job by its full name', () => {
    const job = findJob(
      jobs,
      'projects/my-project/locations/us-central1/jobs/nightly-report',
    );

    assert.equal(job, findJob(jobs, 'nightly-report'));
    assert.equal(job?.id, 'nightly-report');
  });

  it('finds nothing for an undeclared id, or another case', () => {
    assert.equal(findJob(jobs, 'weekly'), undefined);
    assert.equal(findJob(jobs, 'Nightly-Report'), undefined);
    assert.equal(
      findJob(jobs, 'projects/p/locations/l/jobs/weekly'),
      undefined,
    );
  });
});

describe('jobIdOf and jobInfoOf', () => {
  it('reads the short id from either form of the job name', () => {
    assert.equal(jobIdOf('nightly'), 'nightly');
    assert.equal(
      jobIdOf('projects/example.com:p/locations/europe-west1/jobs/nightly'),
      'nightly',
    );
  });

  it('reads no id from a name that breaks the rule', () => {
    assert.equal(jobIdOf('night ly'), undefined);
    assert.equal(jobIdOf('projects/p/locations/l/jobs/a/b'), undefined);
    assert.equal(jobIdOf('x'.repeat(501)), undefined);
  });

  it('gives a job its id, schedule and time zone, and nothing else', () => {
    const [job] = validateJobs([
      defineJob({
        id: 'n',
        schedule: '0 2 * * *',
        timeZone: 'Europe/Berlin',
        run,
      }),
    ]);

    assert.deepEqual(jobInfoOf(job as NonNullable<typeof job>), {
      id: 'n',
      schedule: '0 2 * * *',
      timeZone: 'Europe/Berlin',
    });
  });
});
