/**
 * Missed-run detection as shipped, live on the emulator with each delivery at its own time on a
 * driven clock (`fixtures/driven-deliveries.ts`): the run audit `src/jobs.ts` declares, every
 * job's Scheduler defaults, and the seven ways an attack found detection lying or going silent.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { Timestamp } from '@google-cloud/firestore';
import { LedgerUnavailableError } from '../src/core/errors.ts';
import { checkFailures } from '../src/ops/format-runs.ts';
import { readHistory } from '../src/ops/slot-history.ts';
import { REPORT_UNCONFIRMED } from '../src/policy/final-failure.ts';
import {
  defineJob,
  type JobDeclaration,
  validateJobs,
} from '../src/policy/job-declaration.ts';
import { checkDocumentId } from '../src/policy/missed-run-cursor.ts';
import {
  MissedRunCheck,
  type MissedRunCheckDeps,
  REPORT_NOT_ACKNOWLEDGED,
} from '../src/policy/missed-runs.ts';
import {
  backoffMs,
  lastRetrySentMs,
  longestExecutionMs,
  makesRetry,
  retryWindowMs,
} from '../src/policy/retry-policy.ts';
import { defineAuditJob, isAuditJob } from '../src/policy/run-audit.ts';
import { slotRunId } from '../src/policy/run-history.ts';
import { retentionProblems } from '../src/policy/schedule-time.ts';
import {
  closedAfterMs,
  executionClosedMs,
} from '../src/policy/slot-verdict.ts';
import {
  at,
  type DrivenClock,
  deliverAt,
  drivenClock,
  MINUTE,
  reportsOf,
  type Served,
  slots,
} from './fixtures/driven-deliveries.ts';
import { jobs as starterJobs } from './fixtures/starter/src/jobs.ts';
import {
  captureLogs,
  newLedger,
  schedulerHeaders,
  serveJobs,
} from './helpers.ts';

const ON = { MISSED_RUN_CHECK: 'on' };

/** The run audit as `src/jobs.ts` declares it (as shipped, if it was removed there). */
const DECLARED_AUDIT = starterJobs.find((job) => isAuditJob(job));
const AUDIT =
  DECLARED_AUDIT ??
  defineAuditJob({ id: 'run-audit', schedule: '*/5 * * * *' });

function declare(...declarations: JobDeclaration[]) {
  return validateJobs(declarations);
}

/** An hourly job whose every attempt fails at once. */
function failingHourly(
  retries: Pick<JobDeclaration, 'retryCount' | 'maxRetryDurationSeconds'> = {},
): JobDeclaration {
  return defineJob({
    id: 'failing',
    schedule: '0 * * * *',
    ...retries,
    run: () => {
      throw new Error('downstream refused');
    },
  });
}

/**
 * When a slot executed on time closes, ms: its longest execution (the last retry sent within
 * `maxRetryDuration`, run to its deadline) and one attempt deadline more (`slotVerdict`).
 */
function slotClosesAt(
  job: Parameters<typeof longestExecutionMs>[0],
  slot: Date,
): number {
  return (
    slot.getTime() + longestExecutionMs(job) + job.attemptDeadlineSeconds * 1000
  );
}

/** A job Scheduler never retries: its one attempt's failure is final. */
const NO_RETRIES = { retryCount: 0, maxRetryDurationSeconds: 0 };

/**
 * The one attempt of a job Scheduler never retries, ms after its slot, at the latest it can come:
 * an attempt deadline late, having waited behind the job's previous execution. Only then can the
 * attempt tell that no attempt of Scheduler's own execution of the slot is still to come (the
 * claim before may have been a Force run's, `lastRetrySentMs` in final-failure.ts).
 */
function latestOnlyAttempt(job: { attemptDeadlineSeconds: number }): number[] {
  return [job.attemptDeadlineSeconds * 1000];
}

/**
 * Scheduler's attempts of one slot, ms after it: the first at the slot, each retry its back-off
 * after a failure, until RetryConfig makes none (the job fails at once: an attempt takes no time).
 */
function schedulerAttemptOffsets(
  job: Parameters<typeof makesRetry>[0],
): number[] {
  const attempts: number[] = [0];
  while (makesRetry(job, attempts.length - 1, attempts.at(-1) as number)) {
    attempts.push(
      (attempts.at(-1) as number) + backoffMs(job, attempts.length - 1),
    );
  }
  return attempts;
}

/** A delivery of the timeline: a job's slot, at its time or later. */
interface Delivery {
  readonly fn: Served;
  readonly jobId: string;
  readonly slot: Date;
  readonly when?: Date;
}

/** Delivers each in time order (the job's slot before the audit at the same time). */
async function play(
  time: DrivenClock,
  deliveries: Delivery[],
  after?: () => void,
) {
  const sorted = deliveries
    .map((d, i) => ({
      ...d,
      when: d.when ?? new Date(d.slot.getTime() + 5000),
      i,
    }))
    .sort((a, b) => a.when.getTime() - b.when.getTime() || a.i - b.i);
  for (const d of sorted) {
    await deliverAt(d.fn, time, d.jobId, d.slot, d.when);
    after?.();
  }
}

/** The audit's slots (every 5 minutes, as shipped) in [from, to) on `fn`. */
function audits(
  fn: Served | ((i: number) => Served),
  from: Date,
  to: Date,
): Delivery[] {
  return slots(from, to, 5).map((slot, i) => ({
    fn: typeof fn === 'function' ? fn(i) : fn,
    jobId: AUDIT.id,
    slot,
  }));
}

function every(
  fn: Served,
  jobId: string,
  from: Date,
  to: Date,
  step: number,
  skip: Date[] = [],
) {
  const left = new Set(skip.map((d) => d.getTime()));
  return slots(from, to, step)
    .filter((slot) => !left.has(slot.getTime()))
    .map((slot): Delivery => ({ fn, jobId, slot }));
}

/**
 * Job `changing` without the run audit, served on a driven clock from 12:00 by two revisions
 * sharing one collection: `old` declaring `before`, `now` declaring `after` (a schedule change).
 */
function changedSchedule(before: string, after: string) {
  const time = drivenClock(at('12:00'));
  const job = (schedule: string) =>
    declare(defineJob({ id: 'changing', schedule, run: () => {} }));
  const old = serveJobs(job(before), { env: ON }, { clock: time.clock });
  const now = serveJobs(
    job(after),
    { env: ON, collection: old.collection },
    { clock: time.clock },
  );
  return { time, old, now };
}

/**
 * `runs --check` and `runs --backfill --dry-run` on `collection` at `now`, from `jobsModule`, over
 * the last `since` (3h unless given).
 */
function judgeByCommands(
  collection: string,
  now: Date,
  jobsModule: string,
  since = '3h',
) {
  const { METADATA_SERVER_DETECTION: _, ...env } = process.env;
  const runs = (...args: string[]) =>
    spawnSync(
      process.execPath,
      [
        'src/ops/runs.ts',
        '--collection',
        collection,
        '--since',
        since,
        '--job',
        'changing',
        '--now',
        now.toISOString(),
        ...args,
      ],
      {
        env: {
          ...env,
          JOBS_MODULE: jobsModule,
          RETENTION_SECONDS: '31536000',
        },
        encoding: 'utf8',
        timeout: 60_000,
      },
    );
  return {
    check: runs('--check'),
    backfill: runs('--backfill', '--dry-run', '--url', 'http://127.0.0.1:9'),
  };
}

/**
 * A per-minute job `quick` that Scheduler never retries, served, with a missed-run check on a
 * clock the test moves ahead (`setAhead`, ms) and a reader of its cursor (ms).
 */
function quickJobCheck() {
  const jobs = declare(
    defineJob({
      id: 'quick',
      schedule: '* * * * *',
      attemptDeadlineSeconds: 15,
      retryCount: 0,
      maxRetryDurationSeconds: 0,
      run: () => {},
    }),
  );
  const fn = serveJobs(jobs, { env: ON });
  let ahead = 0;
  const clock = async () =>
    new Date((await fn.ledger.documents.serverTime()).getTime() + ahead);
  const check = new MissedRunCheck({
    history: fn.history,
    jobDocuments: fn.jobDocuments,
    clock,
  });
  const cursor = async () => {
    const { data } = await fn.jobDocuments.readData(
      checkDocumentId('quick', []),
    );
    return (data?.checked_before as Timestamp | undefined)?.toMillis();
  };
  const setAhead = (ms: number) => {
    ahead = ms;
  };
  const job = jobs[0] as never;
  return { job, fn, check, logs: captureLogs(), clock, setAhead, cursor };
}

/**
 * The last closed slot of `quick` after the cursor, its report written by `writer` (a check that
 * never logged it: still marked unlogged); the cursor just before it.
 */
async function unloggedReport(
  { job, fn, clock }: ReturnType<typeof quickJobCheck>,
  writer: string,
): Promise<{ readonly slot: Date; readonly runId: string }> {
  const now = await clock();
  const slot = new Date(
    Math.floor((now.getTime() - closedAfterMs(job)) / MINUTE) * MINUTE,
  );
  await fn.jobDocuments.write(checkDocumentId('quick', []), 'test', {
    checked_before: Timestamp.fromMillis(slot.getTime() - 1),
    run_seen: true,
    seen_at: Timestamp.fromMillis(now.getTime()),
  });
  const runId = slotRunId('quick', slot, []);
  const details = {
    jobName: 'quick',
    scheduleTime: slot.toISOString(),
    keyScope: '',
  };
  assert.notEqual(
    await fn.history.reportMissed(runId, details, writer),
    'exists',
  );
  return { slot, runId };
}

/** A check of `quick` whose run history is `fn`'s but for the calls `overrides` replaces. */
function checkWith(
  { fn, clock }: ReturnType<typeof quickJobCheck>,
  overrides: Partial<MissedRunCheckDeps['history']>,
): MissedRunCheck {
  const history = fn.history;
  return new MissedRunCheck({
    history: {
      getMany: history.getMany.bind(history),
      reportMissed: history.reportMissed.bind(history),
      markReported: history.markReported.bind(history),
      claimRelog: history.claimRelog.bind(history),
      acknowledgeReport: history.acknowledgeReport.bind(history),
      ...overrides,
    },
    jobDocuments: fn.jobDocuments,
    clock,
  });
}

/**
 * Runs two checks of `quick` at once, each one's first read held until the other's has come, then
 * until `meanwhile` (run once both have read) is done: both judge the same records.
 */
async function twoChecksAtOnce(
  quick: ReturnType<typeof quickJobCheck>,
  meanwhile: () => Promise<void> = async () => {},
): Promise<void> {
  const { job, fn, logs } = quick;
  let reads = 0;
  let bothRead = () => {};
  const barrier = new Promise<void>((resolve) => {
    bothRead = resolve;
  });
  const released = barrier.then(meanwhile);
  const racingCheck = () => {
    let first = true;
    return checkWith(quick, {
      getMany: async (ids) => {
        const read = await fn.history.getMany(ids);
        if (first) {
          first = false;
          reads++;
          if (reads === 2) {
            bothRead();
          }
          await released;
        }
        return read;
      },
    });
  };
  await Promise.all(
    [racingCheck(), racingCheck()].map((check) =>
      check.check(job, [], logs.logger),
    ),
  );
}

/** The `missed run` lines of `slot` logged so far, as `[relogged, reporter]`. */
function missedRunLines(
  logs: ReturnType<typeof quickJobCheck>['logs'],
  slot: Date,
): unknown[][] {
  return logs
    .lines()
    .filter((l) => l.message === 'missed run' && l.slot === slot.toISOString())
    .map((l) => [l.relogged, l.reporter]);
}

describe('detection as shipped (the run audit of src/jobs.ts, Scheduler defaults)', () => {
  it('declares the run audit every 5 minutes', {
    skip:
      DECLARED_AUDIT === undefined &&
      'src/jobs.ts declares no run audit (yours, not as shipped)',
  }, () => {
    assert.equal(DECLARED_AUDIT?.schedule, '*/5 * * * *');
  });

  it('reports a slot never delivered once, within 10 minutes of its slot closing', async () => {
    const time = drivenClock(at('12:00'));
    const jobs = declare(
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
      AUDIT,
    );
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const never = at('12:05');
    let reportedAt: number | undefined;

    await play(
      time,
      [
        ...every(fn, 'five', at('12:00'), at('14:30'), 5, [never]),
        ...audits(fn, at('12:00'), at('14:30')),
      ],
      () => {
        if (reportedAt === undefined && reportsOf(fn).length > 0) {
          reportedAt = time.now().getTime();
        }
      },
    );

    assert.deepEqual(reportsOf(fn), [
      ['missed run', never.toISOString(), 'five'],
    ]);
    const closes = slotClosesAt(jobs[0] as never, never);
    assert.ok(
      reportedAt !== undefined && reportedAt >= closes,
      'never before its slot closed',
    );
    assert.ok(
      reportedAt - closes <= 10 * MINUTE,
      `${(reportedAt - closes) / 1000} s`,
    );
  });

  it('reports a final failure by its own attempt, once: the release write carries the report', async () => {
    const time = drivenClock(at('12:00'));
    const jobs = declare(failingHourly(NO_RETRIES), AUDIT);
    const job = jobs[0] as never;
    const a = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const b = serveJobs(
      jobs,
      { env: ON, collection: a.collection },
      { clock: time.clock },
    );
    const slot = at('12:00');
    const attempts = latestOnlyAttempt(job);
    const reportsAfter: number[] = [];
    for (const [i, offset] of attempts.entries()) {
      const fn = i % 2 === 0 ? a : b;
      const when = new Date(slot.getTime() + offset);
      assert.equal(await deliverAt(fn, time, 'failing', slot, when), 'failed');
      reportsAfter.push(reportsOf(a, b).length);
    }
    // Later checks, on both instances, find it reported (before the 13:00 slot, never delivered,
    // closes).
    await play(
      time,
      audits((i) => (i % 2 === 0 ? a : b), at('12:10'), at('13:00')),
    );

    assert.deepEqual(
      reportsAfter,
      attempts.map((_, i) => (i === attempts.length - 1 ? 1 : 0)),
      'reported by the last attempt, not before',
    );
    assert.deepEqual(reportsOf(a, b), [
      ['run failed after retries', slot.toISOString(), 'failing'],
    ]);
    const { record } = await a.ledger.documents.read(
      slotRunId('failing', slot, []),
    );
    assert.ok(record?.status === 'failed' && record.reportedAt !== undefined);
  });

  it('says a final failure report may not have landed when its release goes unanswered', async () => {
    const time = drivenClock(at('12:00'));
    const jobs = declare(failingHourly(NO_RETRIES), AUDIT);
    const job = jobs[0] as never;
    const { ledger, collection } = newLedger();
    // The last attempt's release is written nowhere and answered with Firestore's timeout.
    let lastAttempt = false;
    const unanswered = new Proxy(ledger, {
      get(target, key) {
        if (key === 'release' && lastAttempt) {
          return () =>
            Promise.reject(
              new LedgerUnavailableError('no answer to the release'),
            );
        }
        const value = Reflect.get(target, key);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const fn = serveJobs(
      jobs,
      { env: ON, ledger: unanswered, collection },
      { clock: time.clock },
    );
    const slot = at('12:00');
    const attempts = latestOnlyAttempt(job);

    for (const [i, offset] of attempts.entries()) {
      lastAttempt = i === attempts.length - 1;
      await deliverAt(
        fn,
        time,
        'failing',
        slot,
        new Date(slot.getTime() + offset),
      );
    }

    const messages = fn.logs.lines().map((l) => String(l.message));
    const report = messages.indexOf('run failed after retries');
    assert.ok(report >= 0, 'the last attempt logged its report');
    assert.equal(
      messages.slice(report + 1).filter((m) => m === REPORT_UNCONFIRMED).length,
      1,
    );
    const { record } = await fn.ledger.documents.read(
      slotRunId('failing', slot, []),
    );
    assert.ok(record?.status === 'in_progress', 'the report did not land');
  });

  it('leaves a final failure to the audit while Scheduler may still send a retry, and the audit reports it once (issue 40)', async () => {
    // The shipped retry policy, every attempt failing at once: Scheduler retries while a retry's
    // send time is within maxRetryDuration (3600 s) of the first attempt, which its last attempt,
    // at 3330 s, cannot tell apart from attempts Scheduler made that met a lease (a 409 is not
    // recorded) and retried up to 3600 s. The 11:00 slot completed, at 11:00:05.
    const time = drivenClock(at('11:00'));
    const jobs = declare(
      defineJob({
        id: 'failing',
        schedule: '0 * * * *',
        run: ({ scheduleTime }) => {
          if (scheduleTime.getTime() === at('12:00').getTime()) {
            throw new Error('downstream refused');
          }
        },
      }),
      AUDIT,
    );
    const job = jobs[0] as never;
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const slot = at('12:00');
    const attempts = schedulerAttemptOffsets(job);
    let reportsAfterAttempts: number | undefined;
    let reportedAt: number | undefined;

    await play(
      time,
      [
        { fn, jobId: 'failing', slot: at('11:00') },
        ...attempts.map((offset) => ({
          fn,
          jobId: 'failing',
          slot,
          when: new Date(slot.getTime() + offset),
        })),
        ...audits(fn, at('11:00'), at('14:00')),
      ],
      () => {
        if (time.now().getTime() === slot.getTime() + (attempts.at(-1) ?? 0)) {
          reportsAfterAttempts = reportsOf(fn).length;
        }
        if (reportedAt === undefined && reportsOf(fn).length > 0) {
          reportedAt = time.now().getTime();
        }
      },
    );

    assert.ok((attempts.at(-1) ?? 0) < lastRetrySentMs(job));
    assert.equal(reportsAfterAttempts, 0, 'no attempt reported it');
    assert.deepEqual(reportsOf(fn), [
      ['run failed after retries', slot.toISOString(), 'failing'],
    ]);
    const closes = slot.getTime() + closedAfterMs(job);
    assert.ok(
      reportedAt !== undefined &&
        reportedAt >= closes &&
        reportedAt - closes <= 10 * MINUTE,
      `reported ${reportedAt === undefined ? 'never' : (reportedAt - closes) / 1000} s after its window closed`,
    );
  });

  it("reports a daily job's failure the same day: the audit, when no retry reached the function", async () => {
    const time = drivenClock(at('12:00'));
    const hour = new Date(at('12:00')).getUTCHours();
    const jobs = declare(
      defineJob({
        id: 'daily',
        schedule: `0 ${hour} * * *`,
        run: () => {
          throw new Error('the export failed');
        },
      }),
      AUDIT,
    );
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });
    let reportedAt: number | undefined;

    await play(
      time,
      [
        { fn, jobId: 'daily', slot: at('12:00') },
        ...audits(fn, at('12:00'), at('14:00')),
      ],
      () => {
        if (reportedAt === undefined && reportsOf(fn).length > 0) {
          reportedAt = time.now().getTime();
        }
      },
    );

    assert.deepEqual(reportsOf(fn), [
      ['run failed after retries', at('12:00').toISOString(), 'daily'],
    ]);
    const closes = slotClosesAt(jobs[0] as never, at('12:00'));
    assert.ok(
      reportedAt !== undefined && reportedAt - closes <= 10 * MINUTE,
      `${reportedAt === undefined ? 'never' : (reportedAt - closes) / 1000} s`,
    );
  });

  it('reports each slot once across two instances checking at the same time', async () => {
    const time = drivenClock(at('12:00'));
    const jobs = declare(
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
      AUDIT,
    );
    const a = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const b = serveJobs(
      jobs,
      { env: ON, collection: a.collection },
      { clock: time.clock },
    );
    const never = [at('12:05'), at('12:40')];
    const missing = new Set(never.map((d) => d.getTime()));

    for (const [i, slot] of slots(at('12:00'), at('14:30'), 5).entries()) {
      time.set(new Date(slot.getTime() + 5000));
      // The job's delivery on one instance and the audit on the other, at once.
      const [jobFn, auditFn] = i % 2 === 0 ? [a, b] : [b, a];
      const answers = await Promise.all([
        missing.has(slot.getTime())
          ? Promise.resolve({ body: { outcome: 'processed' } })
          : jobFn.request
              .post('/')
              .set(schedulerHeaders('five', slot.toISOString())),
        auditFn.request
          .post('/')
          .set(schedulerHeaders(AUDIT.id, slot.toISOString())),
      ]);
      assert.deepEqual(
        answers.map((r) => r.body.outcome),
        ['processed', 'processed'],
      );
    }

    assert.deepEqual(
      reportsOf(a, b).sort(),
      never.map((slot) => ['missed run', slot.toISOString(), 'five']),
    );
  });
});

describe('the attack on detection, finding by finding', () => {
  it('1. judges each slot by the schedule in force when it was due, across a schedule change', async () => {
    const time = drivenClock(at('12:00'));
    const before = declare(
      defineJob({ id: 'changing', schedule: '* * * * *', run: () => {} }),
      AUDIT,
    );
    const after = declare(
      defineJob({ id: 'changing', schedule: '*/2 * * * *', run: () => {} }),
      AUDIT,
    );
    const old = serveJobs(before, { env: ON }, { clock: time.clock });
    const now = serveJobs(
      after,
      { env: ON, collection: old.collection },
      { clock: time.clock },
    );
    const oddMissed = at('12:13');
    const evenMissed = at('13:00');

    // Every minute until 12:30 on the old revision, every other minute from then on the new one.
    await play(time, [
      ...every(old, 'changing', at('12:00'), at('12:30'), 1, [oddMissed]),
      ...audits(old, at('12:00'), at('12:30')),
      ...every(now, 'changing', at('12:30'), at('14:20'), 2, [evenMissed]),
      ...audits(now, at('12:30'), at('14:20')),
    ]);

    assert.deepEqual(reportsOf(old, now).sort(), [
      ['missed run', oddMissed.toISOString(), 'changing'],
      ['missed run', evenMissed.toISOString(), 'changing'],
    ]);
    // `runs --check` from a checkout still declaring the old rule judges by the rules in force too.
    const { METADATA_SERVER_DETECTION: _, ...env } = process.env;
    const cli = spawnSync(
      process.execPath,
      [
        'src/ops/runs.ts',
        '--collection',
        old.collection,
        '--check',
        '--since',
        '3h',
        '--job',
        'changing',
        '--now',
        time.now().toISOString(),
      ],
      {
        env: {
          ...env,
          JOBS_MODULE: 'test/fixtures/jobs-changing.ts',
          RETENTION_SECONDS: '31536000',
        },
        encoding: 'utf8',
        timeout: 60_000,
      },
    );
    const flagged = [
      ...cli.stderr.matchAll(/runs --check: changing (\S+) (\w+)/g),
    ].map((m) => m[1]);
    assert.ok(flagged.length > 0, cli.stderr);
    assert.deepEqual(
      flagged.filter((t) => Date.parse(t as string) >= at('12:25').getTime()),
      [evenMissed.toISOString().replace('.000', '')],
      'no odd slot of the old rule after the change',
    );
  });

  it('1b. reports no slot never scheduled when a rolling deploy flips two schedules past MAX_RULES', async () => {
    const time = drivenClock(at('12:00'));
    const every2 = declare(
      defineJob({ id: 'j', schedule: '*/2 * * * *', run: () => {} }),
      AUDIT,
    );
    const every1 = declare(
      defineJob({ id: 'j', schedule: '* * * * *', run: () => {} }),
      AUDIT,
    );
    const a = serveJobs(every2, { env: ON }, { clock: time.clock });
    const b = serveJobs(
      every1,
      { env: ON, collection: a.collection },
      { clock: time.clock },
    );
    // Three hours on `*/2`, then 45 minutes of a rolling deploy: each 5 minutes the other
    // revision serves (and its audit checks), then `* * * * *` alone. Every slot is delivered.
    const flip = (i: number) => (i % 2 === 0 ? b : a);
    const deploy = slots(at('15:00'), at('15:45'), 5).flatMap((from, i) =>
      flip(i) === b
        ? every(b, 'j', from, new Date(from.getTime() + 5 * MINUTE), 1)
        : every(a, 'j', from, new Date(from.getTime() + 5 * MINUTE), 1).filter(
            (d) => d.slot.getUTCMinutes() % 2 === 0,
          ),
    );
    await play(time, [
      ...every(a, 'j', at('12:00'), at('15:00'), 2),
      ...audits(a, at('12:00'), at('15:00')),
      ...deploy,
      ...audits(flip, at('15:00'), at('15:45')),
      ...every(b, 'j', at('15:45'), at('17:00'), 1),
      ...audits(b, at('15:45'), at('17:00')),
    ]);

    assert.deepEqual(reportsOf(a, b), []);
  });

  it('1c. reports a slot of the old rule that closes after a schedule change, once, and runs --check and --backfill from the new checkout see it', async () => {
    const time = drivenClock(at('12:00'));
    const even = declare(
      defineJob({ id: 'changing', schedule: '*/2 * * * *', run: () => {} }),
      AUDIT,
    );
    const odd = declare(
      defineJob({ id: 'changing', schedule: '1-59/2 * * * *', run: () => {} }),
      AUDIT,
    );
    const old = serveJobs(even, { env: ON }, { clock: time.clock });
    const now = serveJobs(
      odd,
      { env: ON, collection: old.collection },
      { clock: time.clock },
    );
    // Before the old rule's last sighting (the 14:00 audit), closing (at 14:04) after the deploy at
    // 14:01: the first check by the new rule starts at this slot.
    const missed = at('12:58');
    const closes = missed.getTime() + executionClosedMs(even[0] as never);
    assert.ok(
      closes > at('14:00:05').getTime() && closes < at('14:05').getTime(),
    );

    await play(time, [
      ...every(old, 'changing', at('12:00'), at('14:01'), 2, [missed]),
      ...audits(old, at('12:00'), at('14:01')),
    ]);
    // The new rule's first deliveries, 14:01 and 14:03, come before the slot closes.
    await play(time, every(now, 'changing', at('14:01'), at('14:04'), 2));
    // Closed, not yet reported (the next check is the 14:05 delivery's): the commands judge it
    // themselves, from the checkout of the deploy, which declares only the new rule; the cursor's
    // rules place the slot.
    time.set(new Date(closes));
    const { check, backfill } = judgeByCommands(
      old.collection,
      time.now(),
      'test/fixtures/jobs-odd-minutes.ts',
    );
    await play(time, [
      ...every(now, 'changing', at('14:05'), at('14:40'), 2),
      ...audits(now, at('14:05'), at('14:40')),
    ]);

    assert.deepEqual(reportsOf(old, now), [
      ['missed run', missed.toISOString(), 'changing'],
    ]);
    const flagged = [
      ...check.stderr.matchAll(/runs --check: changing (\S+) (\w+)/g),
    ].map((m) => m[1]);
    assert.equal(check.status, 1, check.stderr);
    assert.deepEqual(
      flagged,
      [missed.toISOString().replace('.000', '')],
      check.stderr,
    );
    assert.match(
      backfill.stderr,
      new RegExp(
        `1 missed slot\\(s\\) to deliver[^]*changing ${missed.toISOString().replace('.000', '')}`,
      ),
    );
  });

  it('1d. judges a rule no check saw by its claims: a schedule changed before the first check reports no slot of the new rule in the old span, and the old rule’s own misses', async () => {
    // No run audit: the job's first check is the 13:00 delivery's, after the change at 12:40.
    const { time, old, now } = changedSchedule('*/5 * * * *', '*/2 * * * *');
    // 12:25 (the old rule's alone) and 12:52 (the new rule's alone) are never delivered.
    await play(time, [
      ...every(old, 'changing', at('12:05'), at('12:40'), 5, [at('12:25')]),
      ...every(now, 'changing', at('12:40'), at('13:58'), 2, [at('12:52')]),
    ]);
    // Both closed; the cursor has seen no run yet (the 13:00 check found nothing closed): the
    // commands learn the rules from the claims they list, as the check does.
    time.set(at('13:59'));
    const { check, backfill } = judgeByCommands(
      old.collection,
      time.now(),
      'test/fixtures/jobs-every-two-minutes.ts',
    );
    await play(time, every(now, 'changing', at('14:00'), at('14:04'), 2));

    // Each slot's first claim stamped its rule. The 13:00 check finds nothing closed; the 14:00
    // one reads the first records, learns `*/5` until 12:30 and `*/2` from 12:42 (12:40 both have,
    // so its claim by the new revision proves nothing of Scheduler's schedule), and judges 12:25
    // by the old rule. Before, it took the new rule for the old span: it reported 12:12, a minute
    // the old schedule never had, and neither 12:25 nor 12:52.
    assert.deepEqual(reportsOf(old, now), [
      ['missed run', at('12:25').toISOString(), 'changing'],
      ['missed run', at('12:52').toISOString(), 'changing'],
    ]);
    const flagged = [
      ...check.stderr.matchAll(/runs --check: changing (\S+) (\w+)/g),
    ].map((m) => m[1]);
    const missed = [at('12:25'), at('12:52')].map((d) =>
      d.toISOString().replace('.000', ''),
    );
    assert.equal(check.status, 1, check.stderr);
    assert.deepEqual(flagged, missed, check.stderr);
    assert.match(backfill.stderr, /2 missed slot\(s\) to deliver/);
  });

  it('1e. takes no rule from a backfill sent through the new revision, nor from its claim of a minute both schedules have (the deploy window)', async () => {
    const { time, old, now } = changedSchedule('*/5 * * * *', '* * * * *');
    // deploy.sh deploys the function at 12:29:50 and updates Scheduler at 12:31:30: the new
    // revision serves Scheduler's 12:30, a minute of `*/5`; Scheduler runs every minute from 12:32.
    // 12:20 was missed; the operator backfills it through the new revision at 12:50.
    await play(time, [
      ...every(old, 'changing', at('12:05'), at('12:30'), 5, [at('12:20')]),
      { fn: now, jobId: 'changing', slot: at('12:30') },
      ...every(now, 'changing', at('12:32'), at('12:50'), 1),
    ]);
    const backfill = await now.request.post('/').set({
      ...schedulerHeaders('changing', at('12:20').toISOString()),
      'X-Run-Once-Backfill': 'true',
    });
    assert.equal(backfill.status, 200, JSON.stringify(backfill.body));
    await play(time, every(now, 'changing', at('12:50'), at('14:04'), 1));

    // Before, the 14:00 check took the new revision's claim of 12:30 for a sighting of every
    // minute and reported 12:31, a minute Scheduler never had. The backfill stamps no rule.
    assert.deepEqual(reportsOf(old, now), []);
  });

  it('1g. an earlier version’s cursor, without rules, met by a schedule change: the check learns the old rule from the claims, though it has seen runs', async () => {
    // A job whose slots close within a minute, so that the hourly checks judge what came before.
    const time = drivenClock(at('12:00'));
    const declared = (schedule: string) =>
      declare(
        defineJob({
          id: 'changing',
          schedule,
          attemptDeadlineSeconds: 15,
          retryCount: 0,
          maxRetryDurationSeconds: 0,
          run: () => {},
        }),
      );
    const old = serveJobs(
      declared('*/5 * * * *'),
      { env: ON },
      { clock: time.clock },
    );
    const now = serveJobs(
      declared('* * * * *'),
      { env: ON, collection: old.collection },
      { clock: time.clock },
    );
    // An earlier version's check left the cursor at 12:00: runs seen, no `rules` (it wrote none).
    await old.jobDocuments.write(checkDocumentId('changing', []), 'test', {
      checked_before: Timestamp.fromMillis(at('11:59').getTime()),
      run_seen: true,
      seen_at: Timestamp.fromMillis(at('12:00').getTime()),
    });
    // 12:00 and 12:52 are never delivered; the deploy moves the job to every minute at 12:41.
    await play(time, [
      ...every(old, 'changing', at('12:05'), at('12:41'), 5),
      ...every(now, 'changing', at('12:41'), at('13:02'), 1, [at('12:52')]),
    ]);

    // The 13:00 check reads a cursor that sighted no rule: the claims show `*/5` until 12:40.
    // Before, the check took every minute for the whole range and reported 12:01 to 12:04,
    // 12:06… (minutes Scheduler never had) with the two real misses.
    assert.deepEqual(reportsOf(old, now), [
      ['missed run', at('12:00').toISOString(), 'changing'],
      ['missed run', at('12:52').toISOString(), 'changing'],
    ]);
  });

  it('1f. runs --check learns an old schedule that shares no minute with the new one from its records: the old rule’s miss, no minute of the new rule before it', async () => {
    const { time, old, now } = changedSchedule(
      '*/15 * * * *',
      '5-59/15 * * * *',
    );
    // 12:30 is missed; the deploy moves the job to 5, 20, 35 and 50 past the hour from 12:50.
    await play(time, [
      ...every(old, 'changing', at('12:15'), at('12:50'), 15, [at('12:30')]),
      ...every(now, 'changing', at('12:50'), at('15:20'), 15),
    ]);
    const { check } = judgeByCommands(
      old.collection,
      at('15:20'),
      'test/fixtures/jobs-quarter-past-five.ts',
      '4h',
    );

    // The function's check reads only the new rule's minutes: no record there names the old
    // rule, so it never judges 12:30 (docs/limits.md). The command lists the old schedule's
    // records too: before, it counted 12:20 and 12:35 missed after the first of them.
    const flagged = [
      ...check.stderr.matchAll(/runs --check: changing (\S+) (\w+)/g),
    ].map((m) => m[1]);
    assert.deepEqual(
      flagged,
      [at('12:30').toISOString().replace('.000', '')],
      check.stderr,
    );
  });

  it('2. loses no report when the instance dies right after moving the cursor', async () => {
    const time = drivenClock(at('12:00'));
    const jobs = declare(
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
      AUDIT,
    );
    const a = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const b = serveJobs(
      jobs,
      { env: ON, collection: a.collection },
      { clock: time.clock },
    );
    const never = [at('12:05'), at('12:15')];
    // SIGKILL, as far as Firestore can tell: the write that moves the cursor past the missed slots
    // lands, and nothing of this instance reaches Firestore after it.
    let dead = false;
    const kill = <T extends object>(target: T, names: (keyof T)[]) => {
      for (const name of names) {
        const real = (
          target[name] as (...args: unknown[]) => Promise<unknown>
        ).bind(target);
        (target as Record<keyof T, unknown>)[name] = async (
          ...args: unknown[]
        ) => {
          if (dead) {
            throw new Error('the instance is gone');
          }
          const result = await real(...args);
          const data = args[2] as { checked_before?: Timestamp } | undefined;
          const cursorPast = data?.checked_before?.toMillis() ?? 0;
          if (
            String(name) !== 'getMany' &&
            cursorPast > (never[1] as Date).getTime()
          ) {
            dead = true;
            throw new Error('SIGKILL');
          }
          return result;
        };
      }
    };
    kill(a.jobDocuments, ['write', 'writeWith', 'readData']);
    kill(a.history, ['getMany', 'reportMissed', 'markReported']);

    const timeline = [
      ...every(a, 'five', at('12:00'), at('14:00'), 5, never),
      ...audits(a, at('12:00'), at('14:00')),
    ];
    for (const d of timeline.sort(
      (x, y) => x.slot.getTime() - y.slot.getTime(),
    )) {
      // Once a is gone, b gets every delivery.
      await deliverAt(dead ? b : d.fn, time, d.jobId, d.slot);
    }

    assert.ok(dead, 'the instance died after moving the cursor');
    assert.deepEqual(
      reportsOf(a, b).sort(),
      never.map((slot) => ['missed run', slot.toISOString(), 'five']),
    );
  });

  it('2b. logs a report whose writer died between its write and its log line: the next check logs it, once', async () => {
    const time = drivenClock(at('12:00'));
    const jobs = declare(
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
      AUDIT,
    );
    const a = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const b = serveJobs(
      jobs,
      { env: ON, collection: a.collection },
      { clock: time.clock },
    );
    const never = at('12:05');
    // SIGKILL: the `missed` record lands, and nothing of this instance happens after it (no log
    // line reaches Cloud Logging, no other write reaches Firestore).
    let linesBeforeDeath: number | undefined;
    const reportMissed = a.history.reportMissed.bind(a.history);
    a.history.reportMissed = async (...args) => {
      await reportMissed(...args);
      linesBeforeDeath = a.logs.lines().length;
      throw new Error('SIGKILL');
    };
    for (const target of [a.history, a.jobDocuments] as unknown as Record<
      string,
      unknown
    >[]) {
      for (const name of [
        'getMany',
        'markReported',
        'claimRelog',
        'acknowledgeReport',
        'write',
        'readData',
      ]) {
        const real = target[name] as
          | ((...args: unknown[]) => Promise<unknown>)
          | undefined;
        if (real === undefined) {
          continue;
        }
        target[name] = async (...args: unknown[]) => {
          if (linesBeforeDeath !== undefined) {
            throw new Error('the instance is gone');
          }
          return real.apply(target, args);
        };
      }
    }

    const timeline = [
      ...every(a, 'five', at('12:00'), at('14:00'), 5, [never]),
      ...audits(a, at('12:00'), at('14:00')),
    ];
    for (const d of timeline.sort(
      (x, y) => x.slot.getTime() - y.slot.getTime(),
    )) {
      // Once a is gone, b gets every delivery (the audit's retry among them).
      await deliverAt(
        linesBeforeDeath === undefined ? d.fn : b,
        time,
        d.jobId,
        d.slot,
      );
    }

    assert.ok(
      linesBeforeDeath !== undefined,
      'the instance died after writing the report',
    );
    const seen = a.logs
      .lines()
      .slice(0, linesBeforeDeath)
      .concat(b.logs.lines());
    const reports = seen.filter((l) => l.message === 'missed run');
    assert.deepEqual(
      reports.map((l) => [l.severity, l.slot, l.jobName]),
      [['ERROR', never.toISOString(), 'five']],
    );
  });

  it('2c. passes no report still marked unlogged: a young one stops the cursor, an old one is logged once and acknowledged', async () => {
    const quick = quickJobCheck();
    const { job, fn, check, logs, setAhead, cursor } = quick;
    // The one slot closed after the cursor; another check wrote its report and has not logged it.
    const { slot, runId } = await unloggedReport(quick, 'other-check');
    const lines = () =>
      logs
        .lines()
        .filter(
          (l) => l.message === 'missed run' && l.slot === slot.toISOString(),
        );

    await check.check(job, [], logs.logger);
    const young = { lines: lines().length, cursor: await cursor() };
    setAhead(3 * MINUTE); // past the grace: its writer never logged it
    await check.check(job, [], logs.logger);
    await check.check(job, [], logs.logger);

    assert.deepEqual(
      young,
      { lines: 0, cursor: slot.getTime() },
      'waits for its writer',
    );
    assert.deepEqual(
      lines().map((l) => [l.slot, l.relogged, l.reporter]),
      [[slot.toISOString(), true, 'other-check']],
    );
    const { record } = await fn.ledger.documents.read(runId);
    assert.equal(
      record?.status === 'missed' && record.reportedBy,
      'other-check',
      'acknowledged',
    );
  });

  it('2d. a young unlogged report holds the cursor, not the slots after it: they are reported at once, and nothing twice', async () => {
    const { job, fn, check, logs, clock, setAhead, cursor } = quickJobCheck();
    // Two slots closed after the cursor: another check wrote the first's report, not yet logged;
    // the second has no record at all.
    const now = await clock();
    const later = new Date(
      Math.floor((now.getTime() - closedAfterMs(job)) / MINUTE) * MINUTE,
    );
    const held = new Date(later.getTime() - MINUTE);
    await fn.jobDocuments.write(checkDocumentId('quick', []), 'test', {
      checked_before: Timestamp.fromMillis(held.getTime() - 1),
      run_seen: true,
      seen_at: Timestamp.fromMillis(now.getTime()),
    });
    const details = {
      jobName: 'quick',
      scheduleTime: held.toISOString(),
      keyScope: '',
    };
    assert.notEqual(
      await fn.history.reportMissed(
        slotRunId('quick', held, []),
        details,
        'other-check',
      ),
      'exists',
    );
    // The clock moved on 3 minutes: the slots closed since are reported too, and not judged here.
    const judged = new Set([held.toISOString(), later.toISOString()]);
    const reported = () =>
      logs
        .lines()
        .filter((l) => l.message === 'missed run' && judged.has(String(l.slot)))
        .map((l) => [l.slot, l.relogged === true]);

    await check.check(job, [], logs.logger);
    const first = { lines: reported(), cursor: await cursor() };
    setAhead(3 * MINUTE); // past the grace: its writer never logged it
    await check.check(job, [], logs.logger);

    assert.deepEqual(first, {
      lines: [[later.toISOString(), false]],
      cursor: held.getTime(),
    });
    assert.deepEqual(reported(), [
      [later.toISOString(), false],
      [held.toISOString(), true],
    ]);
  });

  it('2e. two checks at once find a report its writer never marked logged: one of them logs it again', async () => {
    const quick = quickJobCheck();
    const { fn, logs, setAhead } = quick;
    // Its writer may have logged it, then died before marking it logged.
    const { slot, runId } = await unloggedReport(quick, 'other-check');
    setAhead(3 * MINUTE); // past the grace
    // Each check's first read waits for the other's: both judge the same record.
    await twoChecksAtOnce(quick);

    assert.deepEqual(missedRunLines(logs, slot), [[true, 'other-check']]);
    const { record } = await fn.ledger.documents.read(runId);
    assert.equal(
      record?.status === 'missed' && record.reportedBy,
      'other-check',
      'acknowledged',
    );
  });

  it("2l. two checks whose claims met the same change of the record (a backfill's takeover) log the report again once", async () => {
    const quick = quickJobCheck();
    const { fn, logs, setAhead } = quick;
    const { slot, runId } = await unloggedReport(quick, 'other-check');
    setAhead(3 * MINUTE); // past the grace
    // Both checks read the record; then it changes under both claims, its report kept unlogged
    // (as a backfill that takes the run over keeps it): both claims are refused.
    await twoChecksAtOnce(quick, async () => {
      const read = await fn.history.getMany([runId]);
      const token = read.updateTimes.get(runId) as Timestamp;
      await fn.ledger.documents.write(runId, 'test', { attempts: 1 }, token);
    });

    assert.deepEqual(missedRunLines(logs, slot), [[true, 'other-check']]);
  });

  it('2g. a check whose claim to log an unlogged report again fails still logs it, once', async () => {
    const quick = quickJobCheck();
    const { job, logs, setAhead } = quick;
    const { slot } = await unloggedReport(quick, 'other-check');
    setAhead(3 * MINUTE); // past the grace: its writer never logged it
    const check = checkWith(quick, {
      claimRelog: () =>
        Promise.reject(new LedgerUnavailableError('14 UNAVAILABLE')),
    });

    await check.check(job, [], logs.logger);
    await check.check(job, [], logs.logger);

    assert.deepEqual(missedRunLines(logs, slot), [[true, 'other-check']]);
  });

  it('2i. a check whose claim to log a report again fails, and whose read after it fails too, logs it and warns that it could not mark it logged', async () => {
    const quick = quickJobCheck();
    const { job, fn, logs, setAhead } = quick;
    const { slot } = await unloggedReport(quick, 'other-check');
    setAhead(3 * MINUTE); // past the grace: its writer never logged it
    let claimed = false;
    const check = checkWith(quick, {
      claimRelog: () => {
        claimed = true;
        return Promise.reject(new LedgerUnavailableError('14 UNAVAILABLE'));
      },
      // The read back after the failed claim fails too: no update time to mark it logged on.
      getMany: (ids) =>
        claimed
          ? Promise.reject(new LedgerUnavailableError('14 UNAVAILABLE'))
          : fn.history.getMany(ids),
    });

    await check.check(job, [], logs.logger);

    const lines = logs.lines();
    const relogged = lines.findIndex(
      (l) => l.message === 'missed run' && l.slot === slot.toISOString(),
    );
    assert.ok(relogged >= 0, 'the report is logged again');
    const warned = lines.findIndex(
      (l) => l.message === REPORT_NOT_ACKNOWLEDGED,
    );
    assert.ok(
      warned > relogged,
      'a warning after it says a later check may log it again',
    );
  });

  it('2j. a check whose mark of a report it logged again is refused (another check claimed it meanwhile, and logs it too) warns that it could not mark it logged', async () => {
    const quick = quickJobCheck();
    const { job, logs, setAhead } = quick;
    const { slot } = await unloggedReport(quick, 'other-check');
    setAhead(3 * MINUTE); // past the grace: its writer never logged it
    const check = checkWith(quick, { acknowledgeReport: async () => false });

    await check.check(job, [], logs.logger);

    const lines = logs.lines();
    const relogged = lines.findIndex(
      (l) => l.message === 'missed run' && l.slot === slot.toISOString(),
    );
    const warned = lines.findIndex(
      (l) => l.message === REPORT_NOT_ACKNOWLEDGED,
    );
    assert.ok(relogged >= 0 && warned > relogged, 'the line, then the warning');
  });

  it('2k. a mark refused though it landed (the client retried a commit that had landed) is no warning: nothing is left to log', async () => {
    const quick = quickJobCheck();
    const { job, fn, logs, setAhead } = quick;
    const { slot } = await unloggedReport(quick, 'other-check');
    setAhead(3 * MINUTE); // past the grace: its writer never logged it
    const check = checkWith(quick, {
      acknowledgeReport: async (id, reporter, token) => {
        await fn.history.acknowledgeReport(id, reporter, token);
        return false; // the retry's answer: the record had changed (by the first try)
      },
    });

    await check.check(job, [], logs.logger);
    await check.check(job, [], logs.logger);

    const lines = logs.lines();
    assert.equal(
      lines.filter(
        (l) => l.message === 'missed run' && l.slot === slot.toISOString(),
      ).length,
      1,
    );
    assert.equal(
      lines.filter((l) => l.message === REPORT_NOT_ACKNOWLEDGED).length,
      0,
    );
  });

  it('2h. a report whose claimant died before logging it is logged by a later check: the check that lost the claim keeps its cursor there', async () => {
    const quick = quickJobCheck();
    const { job, fn, logs, setAhead, cursor } = quick;
    // Its writer died between its write and its log line.
    const { slot } = await unloggedReport(quick, 'dead-writer');
    setAhead(3 * MINUTE); // past the grace
    const history = fn.history;
    // This check read the record; another check claims it first and dies before its line.
    const losing = checkWith(quick, {
      claimRelog: async (id, claimant, token) => {
        const read = await history.getMany([id]);
        const fresh = read.updateTimes.get(id) as Timestamp;
        await history.claimRelog(id, 'dead-claimant', fresh);
        return history.claimRelog(id, claimant, token);
      },
    });

    await losing.check(job, [], logs.logger);
    const heldAt = await cursor();
    const later = quick.check;
    for (const minutes of [6, 10]) {
      setAhead(minutes * MINUTE); // the claim's grace passed
      await later.check(job, [], logs.logger);
    }

    assert.equal(
      heldAt,
      slot.getTime(),
      'the cursor stays at the claimed report',
    );
    assert.deepEqual(missedRunLines(logs, slot), [[true, 'dead-writer']]);
  });

  it('2f. a slot whose run still executes past its close holds the cursor, not the slots after it: they are reported at once', async () => {
    let finish = () => {};
    const gate = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const jobs = declare(
      defineJob({
        id: 'long',
        schedule: '* * * * *',
        attemptDeadlineSeconds: 15,
        retryCount: 0,
        maxRetryDurationSeconds: 0,
        run: () => gate,
      }),
    );
    const job = jobs[0] as never;
    const fn = serveJobs(jobs, { env: ON });
    const logs = captureLogs();
    const clock = () => fn.ledger.documents.serverTime();
    const check = new MissedRunCheck({
      history: fn.history,
      jobDocuments: fn.jobDocuments,
      clock,
    });
    // Slots closed: the first's run is still going (its delivery came late), the next ones'
    // deliveries never came. A slot of this job closes 45 s after it (Scheduler never retries).
    const now = (await clock()).getTime();
    const running = new Date(Math.floor(now / MINUTE) * MINUTE - 2 * MINUTE);
    const missed = new Date(running.getTime() + MINUTE);
    // Dated on the check's clock: a cursor without `seen_at` is dated by its write's time, which a
    // check whose estimate of Firestore's time lags by more than the slack reads as written after
    // it (OVERTAKEN), and judges nothing (a fresh-clone CI run failed once that way, or alike).
    await fn.jobDocuments.write(checkDocumentId('long', []), 'test', {
      checked_before: Timestamp.fromMillis(running.getTime() - 1),
      run_seen: true,
      seen_at: Timestamp.fromMillis(now),
    });
    const delivery = fn.request
      .post('/')
      .set(schedulerHeaders('long', running.toISOString()))
      .then((res) => res.body.outcome as string);
    const runningId = slotRunId('long', running, []);
    for (let i = 0; i < 100; i++) {
      const { record } = await fn.ledger.documents.read(runningId);
      if (record?.status === 'in_progress') {
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const reported = () =>
      logs
        .lines()
        .filter((l) => l.message === 'missed run')
        .map((l) => l.slot);
    const cursor = async () => {
      const { data } = await fn.jobDocuments.readData(
        checkDocumentId('long', []),
      );
      return (data?.checked_before as Timestamp | undefined)?.toMillis();
    };

    await check.check(job, [], logs.logger);
    const whileRunning = { reported: reported(), cursor: await cursor() };
    finish();
    assert.equal(await delivery, 'processed');
    await check.check(job, [], logs.logger);

    // Reported while the run still went: the slot after it (and any later one closed by then).
    assert.equal(whileRunning.reported[0], missed.toISOString());
    assert.ok(!whileRunning.reported.includes(running.toISOString()));
    assert.equal(whileRunning.cursor, running.getTime(), 'held at the run');
    // Once it completed: nothing about it, nothing twice (a slot that closed meanwhile, on the
    // real clock, may follow), and the cursor moved on.
    const after = reported();
    assert.deepEqual(
      after.slice(0, whileRunning.reported.length),
      whileRunning.reported,
    );
    assert.ok(!after.includes(running.toISOString()));
    assert.equal(new Set(after).size, after.length, 'nothing twice');
    assert.ok(((await cursor()) ?? 0) > missed.getTime(), 'moved on');
  });

  it('3. closes a slot only after its own execution could have ended, when it started late', async () => {
    // A slot whose first attempt came a minute late (its execution waited behind the previous
    // one, as Scheduler makes it): its retries come that much later than its schedule time says.
    const jobs = declare(
      defineJob({
        id: 'delayed',
        schedule: '* * * * *',
        attemptDeadlineSeconds: 15,
        retryCount: 2,
        maxRetryDurationSeconds: 0,
        minBackoffSeconds: 40,
        maxBackoffSeconds: 40,
        run: () => {
          calls++;
          if (calls < 3) {
            throw new Error('not yet');
          }
        },
      }),
    );
    let calls = 0;
    const job = jobs[0] as never;
    // On the real clock: the records' times are Firestore's, and this slot's first claim comes
    // 60 to 120 s after it.
    const slot = new Date(Math.floor(Date.now() / MINUTE) * MINUTE - MINUTE);
    const time = drivenClock(new Date());
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const logs = captureLogs();
    const check = new MissedRunCheck({
      history: fn.history,
      jobDocuments: fn.jobDocuments,
      clock: time.clock,
    });

    // Every slot before the one before it checked (a cursor as an earlier check left it).
    await fn.jobDocuments.write(checkDocumentId('delayed', []), 'test', {
      checked_before: Timestamp.fromMillis(slot.getTime() - MINUTE),
      run_seen: false,
    });
    assert.equal(
      await deliverAt(fn, time, 'delayed', slot, new Date()),
      'failed',
    );
    assert.equal(
      await deliverAt(fn, time, 'delayed', slot, new Date()),
      'failed',
    );
    // Judged by its schedule time, it closed now; its last retry is still to come.
    time.set(new Date(slot.getTime() + closedAfterMs(job) + 5000));
    await check.check(job, [], logs.logger);
    assert.equal(
      await deliverAt(
        fn,
        time,
        'delayed',
        slot,
        new Date(slot.getTime() + 181_000),
      ),
      'processed',
    );
    // Before the next slot, never delivered, closes.
    time.set(new Date(slot.getTime() + 190_000));
    await check.check(job, [], logs.logger);

    const reports = logs
      .lines()
      .filter((l) => /missed run|failed after retries/.test(String(l.message)));
    assert.deepEqual(reports, [], 'a completed run is never reported failed');
    const { record } = await fn.ledger.documents.read(
      slotRunId('delayed', slot, []),
    );
    assert.ok(
      record?.status === 'completed' && record.reportedAt === undefined,
    );
  });

  it('4. starts afresh, in one line, for a job declared again after days', async () => {
    const time = drivenClock(at('12:00'));
    const jobs = declare(
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
      AUDIT,
    );
    const a = serveJobs(jobs, { env: ON }, { clock: time.clock });
    await play(time, [
      ...every(a, 'five', at('12:00'), at('13:30'), 5),
      ...audits(a, at('12:00'), at('13:30')),
    ]);
    // Three days without the job (another revision declared none), then it is declared again.
    const b = serveJobs(
      jobs,
      { env: ON, collection: a.collection },
      { clock: time.clock },
    );
    await play(time, [
      ...every(b, 'five', at('13:30', 3), at('14:00', 3), 5),
      ...audits(b, at('13:30', 3), at('14:00', 3)),
    ]);

    assert.deepEqual(
      reportsOf(a, b),
      [],
      'no flood of the days it was not declared',
    );
    const said = b.logs
      .lines()
      .filter(
        (l) => l.jobName === 'five' && /starts afresh/.test(String(l.message)),
      );
    assert.equal(said.length, 1);
    assert.match(
      String(said[0]?.message),
      /npm run runs -- --job five --since \d+h/,
    );
    assert.equal(said[0]?.severity, 'WARNING');
  });

  it('5. reports a crashed last attempt whose lease lapsed past the window, once, and --check sees it', async () => {
    const time = drivenClock(at('12:00'));
    const hour = new Date(at('12:00')).getUTCHours();
    const jobs = declare(
      defineJob({ id: 'crashed', schedule: `0 ${hour} * * *`, run: () => {} }),
      AUDIT,
    );
    const job = jobs[0] as never;
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const slot = at('12:00');
    const runId = slotRunId('crashed', slot, []);
    // The attempt claims and the instance dies: no completion, no release, the lease lapses.
    const claimed = await fn.ledger.claim(runId, {
      jobName: 'crashed',
      scheduleTime: slot.toISOString(),
    });
    assert.equal(claimed.state, 'claimed');

    await play(time, audits(fn, at('12:00'), at('14:30')));

    assert.deepEqual(reportsOf(fn), [
      ['run failed after retries', slot.toISOString(), 'crashed'],
    ]);
    const { rows } = await readHistory(fn.history, job, [slot], [], time.now());
    assert.equal(rows[0]?.state, 'failed');
    assert.deepEqual(
      checkFailures(rows).map((r) => r.runId),
      [runId],
    );
  });

  it('6. refuses, loudly, a hand-edited cursor ahead of the closed boundary', async () => {
    const time = drivenClock(at('14:00'));
    const jobs = declare(
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
      AUDIT,
    );
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const boundary =
      at('14:00').getTime() + 5000 - closedAfterMs(jobs[0] as never);
    await fn.jobDocuments.write(checkDocumentId('five', []), 'test', {
      checked_before: Timestamp.fromMillis(boundary + 20 * MINUTE), // between the boundary and now
      run_seen: true,
    });

    await deliverAt(fn, time, AUDIT.id, at('14:00'));

    const refused = fn.logs
      .lines()
      .filter((l) => /cursor document holds/.test(String(l.message)));
    assert.equal(refused.length, 1);
    assert.equal(refused[0]?.severity, 'ERROR');
  });

  it('6b. refuses a hand-edited cursor ahead of the job’s own boundary whatever its closed_after_ms, or of its writer’s, or whose rules no declaration takes; another revision’s closed_after_ms behind it is read', async () => {
    const time = drivenClock(at('14:00'));
    const jobs = declare(
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
      AUDIT,
    );
    const job = jobs[0] as never;
    const boundary = at('14:00').getTime() + 5000 - closedAfterMs(job);
    const rule = { schedule: '*/5 * * * *', time_zone: 'Etc/UTC' };
    const stored = [
      // A tiny closed_after_ms lets a cursor ahead of the job's own boundary pass for closed.
      {
        checked_before: boundary + 20 * MINUTE,
        closed_after_ms: 1000,
        rules: [rule],
      },
      {
        checked_before: boundary - 20 * MINUTE,
        closed_after_ms: -5,
        rules: [rule],
      },
      // Behind the job's boundary, but days past the boundary its writer had at its seen_at: no
      // check writes that; read as a cursor, the slots before it would go unjudged unsaid.
      {
        checked_before: boundary - 20 * MINUTE,
        closed_after_ms: 10 * 86_400_000,
        rules: [rule],
      },
      {
        checked_before: boundary - 20 * MINUTE,
        rules: [{ ...rule, schedule: 'every 5 minutes' }],
      },
      {
        checked_before: boundary - 20 * MINUTE,
        rules: [{ ...rule, time_zone: '+01:00' }],
      },
    ];
    for (const [i, cursor] of stored.entries()) {
      const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });
      await fn.jobDocuments.write(checkDocumentId('five', []), 'test', {
        ...cursor,
        checked_before: Timestamp.fromMillis(cursor.checked_before),
        run_seen: true,
        seen_at: Timestamp.fromMillis(boundary - 20 * MINUTE),
      });

      await deliverAt(fn, time, AUDIT.id, at('14:00'));

      const refused = fn.logs
        .lines()
        .filter((l) => /cursor document holds/.test(String(l.message)));
      assert.equal(refused.length, 1, `cursor ${i}`);
      assert.equal(refused[0]?.severity, 'ERROR');
    }
    // An earlier revision with a longer retry window wrote its closed_after_ms, and a cursor at its
    // own boundary then: still a cursor.
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const longer = closedAfterMs(job) + 10 * MINUTE;
    const seenAt = at('14:00').getTime() - MINUTE;
    await fn.jobDocuments.write(checkDocumentId('five', []), 'test', {
      checked_before: Timestamp.fromMillis(seenAt - longer),
      closed_after_ms: longer,
      rules: [rule],
      run_seen: true,
      seen_at: Timestamp.fromMillis(seenAt),
    });
    await deliverAt(fn, time, AUDIT.id, at('14:00'));
    const lines = fn.logs
      .lines()
      .filter((l) => /cursor document holds/.test(String(l.message)));
    assert.deepEqual(lines, []);
  });

  it('7. refuses at start-up a retention below the delay slots are judged at', () => {
    const [job] = declare(
      defineJob({
        id: 'short',
        schedule: '* * * * *',
        attemptDeadlineSeconds: 15,
        retryCount: 1,
        maxRetryDurationSeconds: 0,
        minBackoffSeconds: 30,
        maxBackoffSeconds: 30,
        run: () => {},
      }),
    );
    assert.equal(retryWindowMs(job as never), 60_000);

    const problems = retentionProblems(job ? [job] : [], 100_000, 30_000);

    assert.equal(problems.length, 1);
    assert.match(
      problems[0] ?? '',
      /RETENTION_SECONDS \(100\) must exceed the judging delay of job short \(135 s/,
    );
  });
});
