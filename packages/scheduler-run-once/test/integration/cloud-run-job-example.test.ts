/**
 * The Cloud Run job proxy example (`examples/cloud-run-job/cloud-run-job.ts`) with the official
 * client (REST transport) against a local fake of the Cloud Run Admin API v2: each run starts one
 * execution whose environment carries the run id, a duplicate delivery starts none, and an
 * execution an earlier attempt of the run started is adopted instead of starting a second one.
 */

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { ExecutionsClient, JobsClient } from '@google-cloud/run';
import {
  createCloudRunJob,
  JOB_NAME_ENV,
  RUN_ID_ENV,
  SCHEDULE_TIME_ENV,
} from '../../examples/cloud-run-job/cloud-run-job.ts';
import {
  noteLaunch,
  type RecordLaunch,
} from '../../examples/shared/launch-once.ts';
import {
  FAKE_PAGE_SIZE,
  type FakeGoogleApis,
  LOCAL_TOKEN,
  localClientOptions,
  startFakeGoogleApis,
} from '../fixtures/fake-google-apis.ts';
import { PAST_DAY, schedulerHeaders, serve, storedRecord } from '../helpers.ts';

/** A Cloud Run job of its own for each test, so launches and lists never mix. */
function aJob(): string {
  return `projects/demo-project/locations/us-central1/jobs/export-${randomUUID().slice(0, 8)}`;
}

describe('examples/cloud-run-job: the proxy', () => {
  let fake: FakeGoogleApis;
  let jobsClient: JobsClient;
  let executionsClient: ExecutionsClient;

  before(async () => {
    fake = await startFakeGoogleApis();
    jobsClient = new JobsClient(localClientOptions(fake.port));
    executionsClient = new ExecutionsClient(localClientOptions(fake.port));
  });
  after(async () => {
    await Promise.all([jobsClient.close(), executionsClient.close()]);
    await fake.close();
  });

  /** The proxy in a function on the emulator, recording launches in its own run records. */
  function proxy(
    job: string,
    wrap = (record: RecordLaunch): RecordLaunch => record,
  ) {
    const recordLaunch = wrap(noteLaunch);
    return serve(
      createCloudRunJob({ job, jobsClient, executionsClient, recordLaunch }),
    );
  }

  it('starts one execution whose environment carries the run id, schedule time and job name', async () => {
    const job = aJob();
    const { request, collection } = proxy(job);

    const res = await request
      .post('/')
      .set(schedulerHeaders('nightly', `${PAST_DAY}T12:00:00Z`));

    assert.equal(res.status, 200, JSON.stringify(res.body));
    const launches = fake.launches.filter((l) => l.path === `/v2/${job}:run`);
    assert.equal(launches.length, 1);
    assert.equal(launches[0]?.authorization, `Bearer ${LOCAL_TOKEN}`);
    assert.deepEqual(launches[0]?.body, {
      overrides: {
        containerOverrides: [
          {
            env: [
              { name: RUN_ID_ENV, value: res.body.runId },
              { name: SCHEDULE_TIME_ENV, value: `${PAST_DAY}T12:00:00.000Z` },
              { name: JOB_NAME_ENV, value: 'nightly' },
            ],
          },
        ],
      },
    });
    const record = await storedRecord(collection, res.body.runId);
    assert.equal(record.status, 'completed');
    assert.equal(record.notes.launch.name, launches[0]?.name);
    assert.equal(record.notes.launch.adopted, false);
  });

  it('starts no execution for a duplicate delivery', async () => {
    const job = aJob();
    const { request } = proxy(job);

    await request
      .post('/')
      .set(schedulerHeaders('nightly', `${PAST_DAY}T12:05:00Z`));
    const duplicate = await request
      .post('/')
      .set(schedulerHeaders('nightly', `${PAST_DAY}T12:05:00Z`));

    assert.equal(duplicate.body.outcome, 'duplicate');
    assert.equal(
      fake.launches.filter((l) => l.path === `/v2/${job}:run`).length,
      1,
    );
  });

  const listsOf = (job: string) =>
    fake.lists.filter((l) => l.path === `/v2/${job}/executions`);
  const otherRun = (i: number) => ({
    overrides: {
      containerOverrides: [
        { env: [{ name: RUN_ID_ENV, value: String(i).repeat(64) }] },
      ],
    },
  });

  it('adopts the execution an attempt started before it failed, found on the second page of the window', async () => {
    const job = aJob();
    let recordings = 0;
    // The first attempt fails after its launch, before the run's completion write.
    const { request, collection } = proxy(
      job,
      (record) => async (ctx, launch) => {
        if (++recordings === 1) {
          throw new Error('the first attempt dies after its launch');
        }
        await record(ctx, launch);
      },
    );
    const first = await request
      .post('/')
      .set(schedulerHeaders('nightly', `${PAST_DAY}T12:10:00Z`));
    // Newer executions of other runs push this run's execution off the first page.
    for (let i = 0; i <= FAKE_PAGE_SIZE; i++) {
      fake.seed('cloud-run-job', job, otherRun(i));
    }
    const listsBefore = listsOf(job).length;

    const retry = await request
      .post('/')
      .set(schedulerHeaders('nightly', `${PAST_DAY}T12:10:00Z`));

    assert.equal(first.body.outcome, 'failed');
    assert.equal(retry.status, 200, JSON.stringify(retry.body));
    const launches = fake.launches.filter((l) => l.path === `/v2/${job}:run`);
    assert.equal(launches.length, 1);
    const stored = await storedRecord(collection, retry.body.runId);
    assert.equal(stored.status, 'completed');
    assert.deepEqual(
      [stored.notes.launch.name, stored.notes.launch.adopted],
      [launches[0]?.name, true],
    );
    const looks = listsOf(job).slice(listsBefore);
    assert.equal(looks.length, 2, 'the look read two pages');
    assert.ok(
      looks[1]?.query.pageToken,
      'the second page was asked for with its token',
    );
  });

  it("reads back only to the run's first claim: older executions end the look", async () => {
    const job = aJob();
    const twoDaysAgo = new Date(Date.now() - 2 * 86_400_000);
    for (let i = 0; i <= FAKE_PAGE_SIZE; i++) {
      fake.seed('cloud-run-job', job, otherRun(i), { createTime: twoDaysAgo });
    }
    const { request } = proxy(job);

    const res = await request
      .post('/')
      .set(schedulerHeaders('nightly', `${PAST_DAY}T12:12:00Z`));

    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(
      fake.launches.filter((l) => l.path === `/v2/${job}:run`).length,
      1,
    );
    assert.equal(
      listsOf(job).length,
      1,
      'one page: it ends before the window does',
    );
  });

  it("starts its own execution when the job's executions belong to other runs", async () => {
    const job = aJob();
    const other = 'f'.repeat(64);
    fake.seed('cloud-run-job', job, {
      overrides: {
        containerOverrides: [{ env: [{ name: RUN_ID_ENV, value: other }] }],
      },
    });
    fake.seed('cloud-run-job', job, {}); // started by hand, without the overrides
    const { request } = proxy(job);

    const res = await request
      .post('/')
      .set(schedulerHeaders('nightly', `${PAST_DAY}T12:15:00Z`));

    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(
      fake.launches.filter((l) => l.path === `/v2/${job}:run`).length,
      1,
    );
    assert.equal(
      listsOf(job).length,
      1,
      'one list call: two executions fit one page',
    );
  });

  it('gives the overrides to the named container of a multi-container job', async () => {
    const job = aJob();
    const run = createCloudRunJob({
      job,
      container: 'worker',
      jobsClient,
      executionsClient,
    });
    const { request } = serve(run);

    await request
      .post('/')
      .set(schedulerHeaders('nightly', `${PAST_DAY}T12:20:00Z`));

    const body = fake.launches.find((l) => l.path === `/v2/${job}:run`)
      ?.body as {
      overrides: { containerOverrides: { name?: string }[] };
    };
    assert.equal(body.overrides.containerOverrides[0]?.name, 'worker');
  });
});
