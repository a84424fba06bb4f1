/**
 * Late runs and catch-up (`policy/late-runs.ts`) through the handler on the emulator, live: every
 * delivery (Scheduler's slots, the run audit every 5 minutes) at its own time on a driven clock,
 * over a real HTTP server, so the audit's catch-up is a request of its own to the function.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { getTestServer } from '@google-cloud/functions-framework/testing';
import type { JobContext } from '../src/core/job-context.ts';
import type { CatchUpDeclaration } from '../src/policy/catch-up.ts';
import {
  defineJob,
  type JobDeclaration,
  validateJobs,
} from '../src/policy/job-declaration.ts';
import { jobStateCollection } from '../src/policy/job-state.ts';
import { checkDocumentId } from '../src/policy/missed-run-cursor.ts';
import { type Pause, pausesField } from '../src/policy/pauses.ts';
import { defineAuditJob } from '../src/policy/run-audit.ts';
import { slotRunId } from '../src/policy/run-history.ts';
import { firestore, serveJobs, storedRecord, until } from './helpers.ts';

const MINUTE = 60_000;
const HOUR = 3_600_000;
/** The driven clock's start: a whole hour ahead of the real one, as in missed-runs.test.ts. */
const NOON = Math.ceil(Date.now() / HOUR) * HOUR + HOUR;
const at = (minutes: number) => new Date(NOON + minutes * MINUTE);

const servers: { close: () => void }[] = [];
after(() => {
  for (const server of servers) {
    server.close();
  }
});

/** What the jobs actually executed: each run's slot, and whether it was caught up. */
type Execution = { job: string; slot: string; caughtUp: boolean };

/**
 * The jobs, the run audit every 5 minutes, served over HTTP on a driven clock; on `collection`
 * when given (a new revision of a function that served before).
 */
async function live(declarations: JobDeclaration[], collection?: string) {
  let now = at(0);
  const executions: Execution[] = [];
  const withRecording = declarations.map((declared) => ({
    ...declared,
    run: async (ctx: JobContext) => {
      executions.push({
        job: declared.id,
        slot: ctx.scheduleTime.toISOString(),
        caughtUp: ctx.caughtUp === true,
      });
      await declared.run(ctx);
    },
  }));
  const audit = defineAuditJob({ id: 'run-audit', schedule: '*/5 * * * *' });
  const jobs = validateJobs([...withRecording, audit]);
  const fn = serveJobs(
    jobs,
    {
      env: { MISSED_RUN_CHECK: 'on' },
      ...(collection === undefined ? {} : { collection }),
    },
    { clock: async () => now },
  );
  const server = getTestServer(fn.name);
  await new Promise<void>((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve()),
  );
  servers.push(server);
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  /** Scheduler's delivery of `jobId`'s `slot`, `delaySeconds` after it: the answer's outcome. */
  const deliver = async (jobId: string, slot: Date, delaySeconds = 5) => {
    now = new Date(slot.getTime() + delaySeconds * 1000);
    const res = await fetch(url, {
      method: 'POST',
      headers: {
        'X-CloudScheduler-JobName': jobId,
        'X-CloudScheduler-ScheduleTime': slot.toISOString(),
      },
    });
    return ((await res.json()) as { outcome: string }).outcome;
  };
  const lines = (message: string) =>
    fn.logs.lines().filter((line) => line.message === message);
  return { fn, deliver, executions, lines, jobs };
}

type Live = Awaited<ReturnType<typeof live>>;

/** The per-minute job `tick` that does nothing, with `catchUp` as given. */
function perMinute(catchUp: CatchUpDeclaration): JobDeclaration {
  return defineJob({
    id: 'tick',
    schedule: '* * * * *',
    catchUp,
    run: () => {},
  });
}

/**
 * Minutes `from` to `to` (exclusive): each slot of `jobId` (every `step` minutes) delivered unless
 * `skip` says Scheduler sent nothing, and the audit every 5 minutes, all at their own time.
 */
async function timeline(
  run: Live,
  jobId: string,
  minutes: { from: number; to: number; step: number },
  skip: (minute: number) => boolean,
  outage: (minute: number) => boolean = () => false,
) {
  for (let m = minutes.from; m < minutes.to; m++) {
    if (outage(m)) {
      continue; // Scheduler sends nothing at all, the audit included
    }
    if (m % minutes.step === 0 && !skip(m)) {
      assert.equal(await run.deliver(jobId, at(m)), 'processed', `slot +${m}`);
    }
    if (m % 5 === 0) {
      await run.deliver('run-audit', at(m), 10);
    }
  }
}

describe('late runs and catch-up, live', () => {
  it('catches up a slot Scheduler never delivered by grace + one audit period, names it late once, and answers Scheduler’s later delivery duplicate', async () => {
    const run = await live([perMinute({})]);
    await timeline(run, 'tick', { from: 0, to: 16, step: 1 }, (m) => m === 7);

    const slot = at(7).toISOString();
    const late = run.lines('late run');
    assert.deepEqual(
      late.map((line) => [line.slot, line.severity, line.follows]),
      [[slot, 'WARNING', 'caught up now']],
    );
    const ran = run.executions.filter((e) => e.slot === slot);
    assert.deepEqual(ran, [{ job: 'tick', slot, caughtUp: true }]);
    // grace 120 s: late at +9 min; the audit at +10 min catches it up.
    const runId = slotRunId('tick', at(7), []);
    await until(
      async () =>
        (await storedRecord(run.fn.collection, runId)).status === 'completed',
    );
    const record = await storedRecord(run.fn.collection, runId);
    assert.ok(record.caught_up_at, 'the record keeps caught_up_at');
    assert.equal(await run.deliver('tick', at(7), 600), 'duplicate');
    assert.equal(run.executions.filter((e) => e.slot === slot).length, 1);
  });

  it('neither catches up nor names late the slots of a paused job', async () => {
    const run = await live([perMinute({})]);
    const writePause = (pause: Pause) =>
      firestore
        .collection(jobStateCollection(run.fn.collection))
        .doc(checkDocumentId('tick', []))
        .set({ job_name: 'tick', pauses: pausesField([pause]) });
    const pause: Pause = {
      pausedAt: new Date(at(6).getTime() + 30_000),
      until: at(60),
      note: 'paused by hand',
      resumedAt: undefined,
      overdueReportedAt: undefined,
    };
    const paused = (m: number) => m >= 7 && m <= 10;
    const minutes = (from: number, to: number) => ({ from, to, step: 1 });
    await timeline(run, 'tick', minutes(0, 7), paused);
    await writePause(pause); // as `npm run pause` writes it, at its time
    await timeline(run, 'tick', minutes(7, 11), paused);
    await writePause({
      ...pause,
      resumedAt: new Date(at(10).getTime() + 30_000),
    });
    await timeline(run, 'tick', minutes(11, 21), paused);

    assert.deepEqual(run.lines('late run'), []);
    const ranPaused = run.executions.filter((e) => paused(minuteOf(e.slot)));
    assert.deepEqual(ranPaused, []);
  });

  it('after a two-hour outage of a */5 job with slots "latest", catches up the newest slot and reports each other once', async () => {
    const run = await live([
      defineJob({
        id: 'five',
        schedule: '*/5 * * * *',
        catchUp: { slots: 'latest' },
        run: () => {},
      }),
    ]);
    const outage = (m: number) => m >= 10 && m < 130;
    await timeline(
      run,
      'five',
      { from: 0, to: 255, step: 5 },
      () => false,
      outage,
    );

    const caughtUp = run.executions.filter((e) => e.caughtUp);
    assert.deepEqual(
      caughtUp.map((e) => minuteOf(e.slot)),
      [125],
      'the newest slot, once',
    );
    // Each missed slot may have waited a longest execution (63 min) behind the one before it
    // (Scheduler never has two executions of a job outstanding), so the last closes about two
    // longest executions and an attempt deadline after its time (120: at 249).
    const reported = run
      .lines('missed run')
      .filter((l) => l.jobName === 'five')
      .map((l) => minuteOf(String(l.slot)));
    const expected = [];
    for (let m = 10; m < 125; m += 5) {
      expected.push(m);
    }
    assert.deepEqual(
      reported.sort((a, b) => a - b),
      expected,
      'each other slot reported once',
    );
    const late = run.lines('late run').filter((l) => l.jobName === 'five');
    assert.ok(
      late.length > 0 && late.length <= 12,
      `late lines: ${late.length}`,
    );
    assert.equal(
      new Set(late.map((l) => l.slot)).size,
      late.length,
      'each late slot named once',
    );
  });

  it('retries a failed caught-up run under the job’s retry settings, then reports it failed after retries, once', async () => {
    const run = await live([
      defineJob({
        id: 'tick',
        schedule: '* * * * *',
        catchUp: {},
        retryCount: 1,
        maxRetryDurationSeconds: 0,
        run: (ctx) => {
          if (ctx.caughtUp === true) {
            throw new Error('the caught-up run fails');
          }
        },
      }),
    ]);
    await timeline(run, 'tick', { from: 0, to: 31, step: 1 }, (m) => m === 7);

    const slot = at(7).toISOString();
    const attempts = run.executions.filter((e) => e.slot === slot);
    assert.deepEqual(
      attempts.map((e) => e.caughtUp),
      [true, true],
      'the first attempt and one retry (retryCount 1)',
    );
    const failed = run.lines('run failed after retries');
    assert.deepEqual(
      failed.map((l) => l.slot),
      [slot],
    );
  });
});

describe('late runs across a schedule change', () => {
  it('names late, and catches up, no slot of the new schedule from before the redeploy', async () => {
    const tick = (schedule: string) =>
      defineJob({ id: 'tick', schedule, catchUp: {}, run: () => {} });
    const before = await live([tick('*/5 * * * *')]);
    await timeline(before, 'tick', { from: 0, to: 22, step: 5 }, () => false);
    // Redeployed at +22 min on every minute; the audit now runs on the new revision. The new
    // schedule has +21, after the last audit's mark and before the redeploy: Scheduler never had it.
    const after = await live([tick('* * * * *')], before.fn.collection);
    await timeline(after, 'tick', { from: 22, to: 41, step: 1 }, () => false);

    assert.deepEqual(
      [...before.lines('late run'), ...after.lines('late run')].map(
        (line) => line.slot,
      ),
      [],
      'no slot is late: Scheduler delivered every slot of the schedule of its time',
    );
    const executed = [...before.executions, ...after.executions];
    assert.deepEqual(
      executed.filter((e) => e.job === 'tick' && e.caughtUp),
      [],
    );
    const scheduled = (e: Execution) => {
      const minute = minuteOf(e.slot);
      return minute < 22 ? minute % 5 === 0 : true;
    };
    assert.deepEqual(
      executed.filter((e) => e.job === 'tick' && !scheduled(e)),
      [],
      'every run is a slot of the schedule deployed at its time',
    );
  });
});

describe('late runs when the mark’s answer is lost', () => {
  it('names a late slot (unconfirmed) when the mark write landed but its answer was lost, and the next check still catches it up', async () => {
    const run = await live([perMinute({})]);
    const documents = run.fn.jobDocuments;
    const write = documents.write.bind(documents);
    let lose = false;
    documents.write = async (...args: Parameters<typeof write>) => {
      const written = await write(...args);
      if (lose && args[1] === 'late-run mark') {
        lose = false;
        throw new Error('the answer of a landed write was lost');
      }
      return written;
    };
    await timeline(run, 'tick', { from: 0, to: 10, step: 1 }, (m) => m === 7);
    lose = true; // the audit at +10 writes the mark, and never hears back
    await timeline(run, 'tick', { from: 10, to: 21, step: 1 }, () => false);

    const slot = at(7).toISOString();
    const late = run.lines('late run').filter((l) => l.slot === slot);
    assert.deepEqual(
      late.map((l) => l.unconfirmed),
      [true],
      'said once, marked unconfirmed',
    );
    assert.deepEqual(
      run.executions.filter((e) => e.slot === slot),
      [{ job: 'tick', slot, caughtUp: true }],
      'caught up by the next check',
    );
  });
});

describe('catch-up bounds, live', () => {
  it('with slots "all", catches up each late slot oldest first, one per audit check, never two at once', async () => {
    const run = await live([perMinute({ slots: 'all' })]);
    const gap = (m: number) => m >= 6 && m <= 8;
    await timeline(run, 'tick', { from: 0, to: 31, step: 1 }, gap);

    const caughtUp = run.executions.filter((e) => e.caughtUp);
    assert.deepEqual(
      caughtUp.map((e) => minuteOf(e.slot)),
      [6, 7, 8],
      'each, oldest first',
    );
    const audits = run.lines('run audit done').map((l) => Number(l.caughtUp));
    assert.ok(
      audits.every((n) => n <= 1),
      `at most one per check: ${audits}`,
    );
  });

  it('reports a late slot older than the catch-up window missed, and never runs it', async () => {
    const run = await live([perMinute({ windowSeconds: 300 })]);
    // The audit is down from +6 to +19 as well: at +20 the slot is 13 minutes old.
    const auditDown = (m: number) => m >= 6 && m < 20;
    for (let m = 0; m < 80; m++) {
      if (m !== 7) {
        assert.equal(await run.deliver('tick', at(m)), 'processed');
      }
      if (m % 5 === 0 && !auditDown(m)) {
        await run.deliver('run-audit', at(m), 10);
      }
    }

    const slot = at(7).toISOString();
    assert.deepEqual(
      run.executions.filter((e) => e.slot === slot),
      [],
      'never run',
    );
    const late = run.lines('late run').filter((l) => l.slot === slot);
    assert.equal(late.length, 1);
    assert.match(String(late[0]?.follows), /^reported missed at about /);
    const missed = run.lines('missed run').filter((l) => l.jobName === 'tick');
    assert.deepEqual(
      missed.map((l) => l.slot),
      [slot],
    );
  });
});

/** The minute after the driven clock's start of an ISO time. */
function minuteOf(iso: string): number {
  return (Date.parse(iso) - NOON) / MINUTE;
}
