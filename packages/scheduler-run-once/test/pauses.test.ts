/**
 * Pauses through the handler on the emulator, live (`src/policy/pauses.ts`, read by
 * `missed-runs.ts` from the check document it reads anyway): each slot delivered at its own time
 * on a driven clock. A slot inside a pause is never reported missed; a pause past its bound is
 * reported once across instances.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { emulatorPauses } from '../src/ops/local-pauses.ts';
import { defineJob, validateJobs } from '../src/policy/job-declaration.ts';
import { jobStateCollection } from '../src/policy/job-state.ts';
import { checkDocumentId } from '../src/policy/missed-run-cursor.ts';
import { type Pause, pausesField } from '../src/policy/pauses.ts';
import { defineAuditJob } from '../src/policy/run-audit.ts';
import { firestore, schedulerHeaders, serveJobs } from './helpers.ts';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const ON = { MISSED_RUN_CHECK: 'on' };
const REPORTS = [
  'missed run',
  'run failed after retries',
  'pause outlived its bound',
];
/**
 * The test's hours count from here: a whole hour ahead of the real clock (the clock is driven), so
 * the times Firestore stamps on claims (its real clock) never lie after a slot's window.
 */
const START = Math.ceil(Date.now() / HOUR) * HOUR + HOUR;
const at = (minutes: number) => new Date(START + minutes * MINUTE);

type Served = ReturnType<typeof serveJobs>;

function drivenClock() {
  let now = at(0);
  return {
    clock: async () => now,
    set: (t: Date) => {
      now = t;
    },
  };
}

async function deliverAt(
  fn: Served,
  time: ReturnType<typeof drivenClock>,
  job: string,
  slot: Date,
) {
  time.set(new Date(slot.getTime() + 5000));
  const res = await fn.request
    .post('/')
    .set(schedulerHeaders(job, slot.toISOString()));
  return res.body.outcome as string;
}

function linesOf(messages: readonly string[], ...fns: Served[]) {
  return fns
    .flatMap((fn) => fn.logs.lines())
    .filter((l) => messages.includes(String(l.message)))
    .map((l) => [l.message, l.slot ?? l.pausedAt, l.severity]);
}

async function writePause(fn: Served, job: string, pause: Pause) {
  await firestore
    .collection(jobStateCollection(fn.collection))
    .doc(checkDocumentId(job, []))
    .set({ job_name: job, pauses: pausesField([pause]) });
}

describe('a paused job, live', () => {
  it("reports none of a pause's slots missed, logs each once as paused, and still reports a slot missed after the resume", async () => {
    const time = drivenClock();
    const jobs = validateJobs([
      defineJob({ id: 'ten', schedule: '*/10 * * * *', run: () => {} }),
    ]);
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const pause = {
      pausedAt: at(60),
      until: at(120),
      note: 'db maintenance',
      resumedAt: at(120),
      overdueReportedAt: undefined,
    };
    const first = at(0);
    assert.equal(await deliverAt(fn, time, 'ten', first), 'processed');
    await writePause(fn, 'ten', pause);

    for (let m = 10; m <= 4 * 60; m += 10) {
      if (m >= 60 && m < 120) {
        continue; // paused: Scheduler sends nothing
      }
      if (m === 130) {
        continue; // after the resume: a real miss
      }
      assert.equal(await deliverAt(fn, time, 'ten', at(m)), 'processed');
    }

    assert.deepEqual(linesOf(REPORTS, fn), [
      ['missed run', at(130).toISOString(), 'ERROR'],
    ]);
    const paused = linesOf(['paused slot'], fn);
    assert.deepEqual(
      paused.map(([, slot]) => slot),
      Array.from({ length: 6 }, (_, i) => at(60 + 10 * i).toISOString()),
    );
    assert.ok(paused.every(([, , severity]) => severity === 'INFO'));
  });

  it('counts no slot paused, with a warning, for a hand-edited pause resumed years ahead', async () => {
    const time = drivenClock();
    const jobs = validateJobs([
      defineJob({ id: 'ten', schedule: '*/10 * * * *', run: () => {} }),
    ]);
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });
    assert.equal(await deliverAt(fn, time, 'ten', at(0)), 'processed');
    await writePause(fn, 'ten', {
      pausedAt: at(5),
      until: undefined,
      note: '',
      resumedAt: at(3650 * 1440), // no resume this code writes lies in the future
      overdueReportedAt: undefined,
    });

    for (let m = 10; m <= 4 * 60; m += 10) {
      if (m === 130) {
        continue; // a real miss: Scheduler was not paused
      }
      assert.equal(await deliverAt(fn, time, 'ten', at(m)), 'processed');
    }

    assert.deepEqual(linesOf(REPORTS, fn), [
      ['missed run', at(130).toISOString(), 'ERROR'],
    ]);
    assert.deepEqual(linesOf(['paused slot'], fn), []);
    const warned = fn.logs
      .lines()
      .filter((l) => /pauses on the cursor document/.test(String(l.message)));
    assert.ok(
      warned.length > 0 && warned.every((l) => l.severity === 'WARNING'),
    );
  });

  it('reports a pause past its --until once across two instances, by the run audit', async () => {
    const time = drivenClock();
    const jobs = validateJobs([
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
      defineAuditJob({ id: 'run-audit', schedule: '*/30 * * * *' }),
    ]);
    const a = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const b = serveJobs(
      jobs,
      { env: ON, collection: a.collection },
      { clock: time.clock },
    );
    assert.equal(await deliverAt(a, time, 'five', at(0)), 'processed');
    await writePause(a, 'five', {
      pausedAt: at(3),
      until: at(90),
      note: '',
      resumedAt: undefined,
      overdueReportedAt: undefined,
    });

    for (let m = 30; m <= 240; m += 30) {
      // Both instances get the audit's delivery at once (a duplicate delivery).
      time.set(new Date(at(m).getTime() + 5000));
      const answers = await Promise.all(
        [a, b].map((fn) =>
          fn.request
            .post('/')
            .set(schedulerHeaders('run-audit', at(m).toISOString())),
        ),
      );
      assert.ok(answers.some((r) => r.body.outcome === 'processed'));
    }

    assert.deepEqual(linesOf(REPORTS, a, b), [
      ['pause outlived its bound', at(3).toISOString(), 'ERROR'],
    ]);
  });

  it('logs a pause past its bound whose report was written by an instance killed before its log line: the next check logs it, once', async () => {
    const time = drivenClock();
    const jobs = validateJobs([
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
      defineAuditJob({ id: 'run-audit', schedule: '*/30 * * * *' }),
    ]);
    const a = serveJobs(jobs, { env: ON }, { clock: time.clock });
    const b = serveJobs(
      jobs,
      { env: ON, collection: a.collection },
      { clock: time.clock },
    );
    assert.equal(await deliverAt(a, time, 'five', at(0)), 'processed');
    await writePause(a, 'five', {
      pausedAt: at(3),
      until: at(90),
      note: '',
      resumedAt: undefined,
      overdueReportedAt: undefined,
    });
    // SIGKILL: the report's write lands, and nothing of the instance happens after it.
    let linesBeforeDeath: number | undefined;
    const write = a.jobDocuments.write.bind(a.jobDocuments);
    a.jobDocuments.write = async (...args) => {
      if (linesBeforeDeath !== undefined) {
        throw new Error('the instance is gone');
      }
      const written = await write(...args);
      if (args[1] === 'overdue pause report') {
        linesBeforeDeath = a.logs.lines().length;
        throw new Error('SIGKILL');
      }
      return written;
    };

    for (let m = 30; m <= 240; m += 30) {
      const fn = linesBeforeDeath === undefined ? a : b;
      assert.ok(await deliverAt(fn, time, 'run-audit', at(m)));
    }

    assert.ok(
      linesBeforeDeath !== undefined,
      'the instance died after writing the report',
    );
    const seen = a.logs
      .lines()
      .slice(0, linesBeforeDeath)
      .concat(b.logs.lines())
      .filter((l) => l.message === 'pause outlived its bound');
    assert.deepEqual(
      seen.map((l) => [l.pausedAt, l.severity]),
      [[at(3).toISOString(), 'ERROR']],
    );
  });

  it("judges the job's closed slots in the check whose overdue-pause acknowledgement failed, not a check later", async () => {
    const time = drivenClock();
    const jobs = validateJobs([
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
      defineAuditJob({ id: 'run-audit', schedule: '*/30 * * * *' }),
    ]);
    const fn = serveJobs(jobs, { env: ON }, { clock: time.clock });
    assert.equal(await deliverAt(fn, time, 'five', at(0)), 'processed');
    await writePause(fn, 'five', {
      pausedAt: at(12),
      until: at(20),
      note: '',
      resumedAt: undefined,
      overdueReportedAt: undefined,
    });
    // The pause's report lands and is logged; marking it logged fails (Firestore unavailable).
    const write = fn.jobDocuments.write.bind(fn.jobDocuments);
    fn.jobDocuments.write = async (...args) => {
      if (args[1] === 'overdue pause report acknowledgement') {
        throw new Error('14 UNAVAILABLE');
      }
      return write(...args);
    };

    // The first audit whose check finds a slot closed (the defaults close a slot 66 min after it):
    // the first slot never delivered is reported by this audit (the next waits behind it, as
    // Scheduler's execution of it could have lasted 63 min).
    assert.equal(await deliverAt(fn, time, 'run-audit', at(90)), 'processed');

    const reported = linesOf(REPORTS, fn);
    assert.deepEqual(reported[0], [
      'pause outlived its bound',
      at(12).toISOString(),
      'ERROR',
    ]);
    assert.deepEqual(
      reported.filter(([message]) => message === 'missed run'),
      [['missed run', at(5).toISOString(), 'ERROR']],
    );
  });

  it("npm run dev's pause reader reads the emulator it is given, not this process's environment", async () => {
    const fn = serveJobs(
      validateJobs([
        defineJob({ id: 'ten', schedule: '*/10 * * * *', run: () => {} }),
      ]),
    );
    // On the real clock: the reader judges the pause by its read's time (Firestore's).
    const now = Date.now();
    await writePause(fn, 'ten', {
      pausedAt: new Date(now - MINUTE),
      until: new Date(now + HOUR),
      note: 'read from the emulator',
      resumedAt: undefined,
      overdueReportedAt: undefined,
    });
    // `npm run dev` sets the emulator only for its children: its own environment has none.
    const host = process.env.FIRESTORE_EMULATOR_HOST;
    delete process.env.FIRESTORE_EMULATOR_HOST;
    let pauseOf: ReturnType<typeof emulatorPauses>;
    try {
      pauseOf = emulatorPauses(
        {
          FIRESTORE_EMULATOR_HOST: host,
          GOOGLE_CLOUD_PROJECT: process.env.GOOGLE_CLOUD_PROJECT,
          RUNS_COLLECTION: fn.collection,
        },
        {},
      );
    } finally {
      process.env.FIRESTORE_EMULATOR_HOST = host;
    }

    assert.equal(
      await pauseOf('ten', new Date(now + 10 * MINUTE)),
      'read from the emulator',
    );
  });
});
