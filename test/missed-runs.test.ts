/**
 * Missed-run detection (`missed-runs.ts`) through the handler on the emulator: each processed run
 * checks the job's earlier slots and reports a missed or finally failed one once, across instances.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defineJob, validateJobs } from '../src/policy/job-declaration.ts';
import { jobs as historyJobs } from './fixtures/jobs-history.ts';
import { schedulerHeaders, serveJobs } from './helpers.ts';

function historyFunction(fail: (slot: string) => boolean) {
  return validateJobs(
    historyJobs.map((job) =>
      defineJob({
        ...job,
        run: (ctx) => {
          if (fail(ctx.scheduleTime.toISOString())) throw new Error('downstream refused');
        },
      }),
    ),
  );
}

describe('missed-run detection', () => {
  it('reports each missed or finally failed earlier slot once across two instances', async () => {
    const env = { MISSED_CHECK_SLOTS: '3' };
    const jobs = historyFunction((slot) => slot === '2026-10-16T12:10:00.000Z');
    const a = serveJobs(jobs, { env });
    const b = serveJobs(jobs, { env, collection: a.collection });
    const at = (time: string) => schedulerHeaders('history-five', `2026-10-16T${time}:00Z`);
    await a.request.post('/').set(at('12:00'));
    await a.request.post('/').set(at('12:10')); // 12:05 never came; 12:10 fails, never retried

    // Two slots processed at once on two instances: both check 12:05 and 12:10.
    const [first, second] = await Promise.all([
      a.request.post('/').set(at('12:15')),
      b.request.post('/').set(at('12:20')),
    ]);
    const later = await b.request.post('/').set(at('12:25'));

    assert.deepEqual([first.body.outcome, second.body.outcome], ['processed', 'processed']);
    assert.equal(later.body.outcome, 'processed');
    const all = [...a.logs.lines(), ...b.logs.lines()].filter((l) =>
      ['missed run', 'run failed after retries'].includes(String(l.message)),
    );
    assert.equal(new Set(all.map((l) => l.slot)).size, all.length, 'no slot reported twice');
    const reports = all;
    assert.deepEqual(
      reports.map((l) => [l.message, l.slot, l.state, l.severity]),
      [
        ['missed run', '2026-10-16T12:05:00.000Z', 'missed', 'ERROR'],
        ['run failed after retries', '2026-10-16T12:10:00.000Z', 'failed', 'ERROR'],
      ],
    );
    assert.equal(reports[0]?.jobName, 'history-five');
    assert.match(String(reports[0]?.runId), /^[0-9a-f]{64}$/);
  });

  it('reports nothing before the oldest slot that has a record: a new job has no missed past', async () => {
    const jobs = historyFunction(() => false);
    const fn = serveJobs(jobs, { env: { MISSED_CHECK_SLOTS: '5' } });

    const first = await fn.request
      .post('/')
      .set(schedulerHeaders('history-five', '2026-10-16T12:00:00Z'));
    const third = await fn.request
      .post('/')
      .set(schedulerHeaders('history-five', '2026-10-16T12:10:00Z'));

    assert.deepEqual([first.body.outcome, third.body.outcome], ['processed', 'processed']);
    const reports = fn.logs.lines().filter((l) => l.message === 'missed run');
    assert.deepEqual(
      reports.map((l) => l.slot),
      ['2026-10-16T12:05:00.000Z'],
      'only the gap after the first run',
    );
  });

  it('never fails the run when the check cannot read Firestore', async () => {
    const jobs = historyFunction(() => false);
    const broken = {
      getMany: () => Promise.reject(new Error('14 UNAVAILABLE')),
      reportMissed: () => Promise.reject(new Error('unused')),
      markReported: () => Promise.reject(new Error('unused')),
      recordSkipped: () => Promise.reject(new Error('unused')),
      serverTime: async () => new Date(),
    };
    const fn = serveJobs(jobs, { env: { MISSED_CHECK_SLOTS: '3' }, history: broken });

    const res = await fn.request.post('/').set(schedulerHeaders('history-five'));

    assert.equal(res.status, 200);
    assert.equal(res.body.outcome, 'processed');
    const warning = fn.logs
      .lines()
      .find((l) => /missed-run check .* failed/.test(String(l.message)));
    assert.equal(warning?.severity, 'WARNING');
  });
});
