/**
 * Functions run as Cloud Run runs them: `functions-framework --target=…` in the repo root, a
 * separate process, over real HTTP. Nothing here depends on what `src/job.ts` does, so the tests
 * pass whatever job a user writes.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, describe, it } from 'node:test';
import {
  freePort,
  type GroupProcess,
  ROOT,
  spawnFunction,
  waitForPort,
  within,
} from '../../src/dev/local-processes.ts';
import {
  documents,
  freshCollection,
  schedulerHeaders,
  until,
} from '../helpers.ts';

/**
 * The compiled package's function (`bench/fixtures/noop.js`: `registerScheduledJob` from `dist/`,
 * as a project's built `index.js` calls it), or `fixture`'s `target`.
 */
function startFunction(
  port: number,
  env: Record<string, string>,
  fixture?: { source: string; target: string },
): GroupProcess {
  // The deliveries here are of slots whose earlier slots never ran: no missed-run reports. Error
  // text exposed, as `npm run dev` runs: the answers say why a job failed.
  // A year's retention, far beyond the schedule times delivered (a day back, PAST_NOON).
  const withoutCheck = {
    MISSED_RUN_CHECK: 'off',
    EXPOSE_ERRORS: 'true',
    RETENTION_SECONDS: '31536000',
    ...env,
  };
  const served = fixture ?? {
    source: 'bench/fixtures/noop.js',
    target: 'handleScheduledJob',
  };
  return spawnFunction({ ...served, port, env: withoutCheck });
}

describe('the built function as a process', {
  skip: !existsSync(`${ROOT}dist/index.js`) && 'run `npm run build` first',
}, () => {
  const children: GroupProcess[] = [];
  after(() => {
    for (const child of children) {
      child.signalGroup('SIGKILL');
    }
  });

  it('serves handleScheduledJob from dist/ and refuses a request without Scheduler headers', async () => {
    const port = await freePort();
    const collection = freshCollection();
    const fn = startFunction(port, { RUNS_COLLECTION: collection });
    children.push(fn);
    await waitForPort(port, { timeoutMs: 10_000, process: fn });

    const res = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST' });
    const body = (await res.json()) as { outcome: string; message: string };

    assert.equal(res.status, 400, fn.output());
    assert.equal(body.outcome, 'invalid_request');
    assert.match(body.message, /X-CloudScheduler-JobName is missing/);
    assert.equal((await documents(collection)).size, 0);
  });

  it('on SIGTERM mid-job aborts the job, releases its claim, answers 500, then exits', async () => {
    const port = await freePort();
    const collection = freshCollection();
    const fn = startFunction(
      port,
      { RUNS_COLLECTION: collection },
      { source: 'test/fixtures/signal-function.ts', target: 'signalFunction' },
    );
    children.push(fn);
    await waitForPort(port, { timeoutMs: 10_000, process: fn });
    const exited = new Promise((resolve) => fn.once('close', resolve));

    const delivery = fetch(`http://127.0.0.1:${port}/`, {
      method: 'POST',
      headers: schedulerHeaders('sigterm-test'),
    });
    await until(async () => (await documents(collection)).size === 1);
    fn.kill('SIGTERM');
    const res = await delivery;
    const body = (await res.json()) as { outcome: string; message: string };
    await within(exited, 30_000, 'the function to exit after SIGTERM');

    assert.equal(res.status, 500, fn.output());
    assert.equal(body.outcome, 'failed');
    assert.match(body.message, /shutting down.*claim is released/);
    const records = [...(await documents(collection)).values()];
    assert.deepEqual(
      records.map((r) => [r.status, r.last_error]),
      [['failed', 'the instance is shutting down']],
      'the claim was released, the failure kept',
    );
    assert.match(fn.output(), /shutting down: aborting running jobs/);
  });

  it('fails at cold start with every configuration problem listed', async () => {
    const fn = startFunction(await freePort(), {
      LEASE_SECONDS: 'five',
      LOG_LEVEL: 'loud',
    });
    children.push(fn);

    const code = await new Promise((resolve) => fn.once('close', resolve));

    assert.equal(code, 1);
    assert.match(
      fn.output(),
      /Invalid configuration:\n {2}- LEASE_SECONDS="five": .*\n {2}- LOG_LEVEL="loud"/,
    );
  });

  it('fails at cold start when RETENTION_SECONDS does not outlast a job’s retries, naming both', async () => {
    const fn = startFunction(await freePort(), { RETENTION_SECONDS: '3600' });
    children.push(fn);

    const code = await new Promise((resolve) => fn.once('close', resolve));

    assert.equal(code, 1);
    assert.match(
      fn.output(),
      /Invalid configuration:\n {2}- RETENTION_SECONDS \(3600\) must exceed the retry window of job \S+ \(3570 s/,
    );
  });

  it('fails at cold start listing every configuration and declaration problem in one message', async () => {
    const fn = startFunction(
      await freePort(),
      { LEASE_SECONDS: 'five' },
      {
        source: 'test/fixtures/invalid-jobs-function.ts',
        target: 'invalidJobs',
      },
    );
    children.push(fn);

    const code = await new Promise((resolve) => fn.once('close', resolve));

    assert.equal(code, 1);
    const output = fn.output();
    assert.match(output, /Invalid configuration:\n/);
    assert.match(output, /- LEASE_SECONDS="five"/);
    assert.match(
      output,
      /- job "groc" \(jobs\[0\]\): schedule "every 5 minutes" .*ScheduleTime/,
    );
    assert.match(
      output,
      /- job "groc" \(jobs\[1\]\): id "groc" is already declared by jobs\[0\]/,
    );
    assert.match(output, /- job "groc" \(jobs\[1\]\): timeZone "Mars\/Base"/);
  });
});
