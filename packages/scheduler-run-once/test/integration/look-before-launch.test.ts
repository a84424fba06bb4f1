/**
 * Look before you launch, for the three proxy targets at once (Workflows, Cloud Run jobs, Cloud
 * Build), with the function as a process: it is killed with SIGKILL right after the fake API
 * received each launch (the fake holds its answer, so no completion write can happen), restarted,
 * and after the dead attempts' leases lapse, Scheduler's retry is delivered. Each target then has
 * received one launch in all, and each run completes by adopting it.
 */

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  freePort,
  type GroupProcess,
  spawnFunction,
  waitFor,
  waitForPort,
} from '../../src/dev/local-processes.ts';
import {
  type FakeGoogleApis,
  type FakeTarget,
  startFakeGoogleApis,
} from '../fixtures/fake-google-apis.ts';
import { deliver, removeScratch, scheduled } from '../fixtures/harness.ts';
import { freshCollection, PAST_NOON, storedRecord } from '../helpers.ts';

const TARGETS: readonly FakeTarget[] = [
  'workflows',
  'cloud-run-job',
  'cloud-build',
];
const SCHEDULE_TIME = PAST_NOON;
/** Short, so the dead attempts' claims lapse within the test; the heartbeat beats every 2/3 s. */
const LEASE_SECONDS = '2';

describe('look before you launch: a proxy killed between its launch and its completion write', () => {
  let fake: FakeGoogleApis;
  let fn: GroupProcess | undefined;
  before(async () => {
    fake = await startFakeGoogleApis();
  });
  after(async () => {
    fn?.signalGroup('SIGKILL');
    await fn?.exited;
    await fake.close();
    removeScratch();
  });

  it('adopts the launch of the killed attempt on the retry: one launch per run, every run completed', async () => {
    const collection = freshCollection();
    const port = await freePort();
    const start = async () => {
      const child = spawnFunction({
        target: 'targetsFunction',
        source: 'test/fixtures/targets-function.ts',
        port,
        env: {
          RUNS_COLLECTION: collection,
          FAKE_APIS_PORT: String(fake.port),
          LEASE_SECONDS,
          // Not what this test is about: with every job's first delivery the check would report
          // each per-minute slot since the fixed schedule time, about 10 s of CPU.
          MISSED_RUN_CHECK: 'off',
          // A year: the fixed schedule time (October 2026) stays deliverable.
          RETENTION_SECONDS: '31536000',
          NODE_ENV: 'test',
          LOG_LEVEL: 'info',
        },
      });
      await waitForPort(port, { timeoutMs: 60_000, process: child });
      return child;
    };
    const url = `http://127.0.0.1:${port}/`;
    fake.holdLaunches = true;
    fn = await start();

    // The first attempts: each looks, finds nothing, launches, and waits on the held answer.
    const firstAttempts = TARGETS.map((target) =>
      deliver(url, scheduled(target, SCHEDULE_TIME)).catch(
        (err: unknown) => err,
      ),
    );
    await waitFor(
      'a launch of every target',
      () =>
        TARGETS.every((t) => fake.launches.some((l) => l.target === t))
          ? true
          : undefined,
      30_000,
    );
    fn.signalGroup('SIGKILL');
    await fn.exited;
    const answers = await Promise.all(firstAttempts);
    fake.holdLaunches = false;
    fn = await start();

    // Scheduler's retry: 409 while the dead attempt's lease is live, then the run.
    const retries = await Promise.all(
      TARGETS.map((target) =>
        waitFor(
          `the retry of ${target} to be processed`,
          async () => {
            const res = await deliver(url, scheduled(target, SCHEDULE_TIME));
            return res.status === 409 ? undefined : res;
          },
          30_000,
          250,
        ),
      ),
    );

    for (const answer of answers) {
      assert.ok(answer instanceof Error, 'the first attempt died');
    }
    for (const [i, target] of TARGETS.entries()) {
      const retry = retries[i];
      assert.equal(
        retry?.status,
        200,
        `${target}: ${JSON.stringify(retry?.body)}`,
      );
      const launches = fake.launches.filter((l) => l.target === target);
      assert.equal(launches.length, 1, `${target}: launches`);
      const record = await storedRecord(collection, retry?.body.runId ?? '');
      assert.equal(record.status, 'completed', target);
      assert.deepEqual(
        [record.notes.launch.name, record.notes.launch.adopted],
        [launches[0]?.name, true],
        `${target}: the run record names the adopted launch`,
      );
    }
  });
});
