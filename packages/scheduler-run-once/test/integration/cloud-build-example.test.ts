/**
 * The Cloud Build proxy example (`examples/cloud-build/cloud-build-job.ts`) with the official client
 * (REST transport) against a local fake of the Cloud Build API: each run runs the trigger once with
 * the run id as a substitution, a duplicate delivery runs nothing, and a build an earlier attempt of
 * the run started is adopted instead of starting a second one. The fake pages two builds at a
 * time, serves a regional trigger on its regional path only, takes no filter and leaves
 * `buildTriggerId` out of the builds `triggers.run` started.
 */

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { CloudBuildClient } from '@google-cloud/cloudbuild';
import {
  createCloudBuildJob,
  JOB_NAME_SUBSTITUTION,
  RUN_ID_SUBSTITUTION,
  SCHEDULE_TIME_SUBSTITUTION,
} from '../../examples/cloud-build/cloud-build-job.ts';
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

const LOCATION = 'projects/demo-project/locations/us-central1';

/** A trigger of its own for each test, so launches and lists never mix. */
function aTrigger(): { trigger: string; triggerId: string } {
  const triggerId = randomUUID();
  return { trigger: `${LOCATION}/triggers/${triggerId}`, triggerId };
}

describe('examples/cloud-build: the proxy', () => {
  let fake: FakeGoogleApis;
  let client: CloudBuildClient;

  before(async () => {
    fake = await startFakeGoogleApis();
    client = new CloudBuildClient(localClientOptions(fake.port));
  });
  after(async () => {
    await client.close();
    await fake.close();
  });

  /** The proxy in a function on the emulator, recording launches in its own run records. */
  function proxy(
    trigger: string,
    wrap = (record: RecordLaunch): RecordLaunch => record,
  ) {
    return serve(
      createCloudBuildJob({ trigger, client, recordLaunch: wrap(noteLaunch) }),
    );
  }

  const launchesOf = (triggerId: string) =>
    fake.launches.filter(
      (l) => l.target === 'cloud-build' && l.body.triggerId === triggerId,
    );

  it('runs the trigger once with the run id, schedule time and job name as substitutions', async () => {
    const { trigger, triggerId } = aTrigger();
    const { request, collection } = proxy(trigger);

    const res = await request
      .post('/')
      .set(schedulerHeaders('nightly', `${PAST_DAY}T12:00:00Z`));

    assert.equal(res.status, 200, JSON.stringify(res.body));
    const launches = launchesOf(triggerId);
    assert.equal(launches.length, 1);
    assert.equal(launches[0]?.authorization, `Bearer ${LOCAL_TOKEN}`);
    // Without projectId, REST transcoding takes the regional binding, the one the reference names.
    assert.equal(launches[0]?.path, `/v1/${trigger}:run`);
    assert.deepEqual(launches[0]?.body.source, {
      substitutions: {
        [RUN_ID_SUBSTITUTION]: res.body.runId,
        [SCHEDULE_TIME_SUBSTITUTION]: `${PAST_DAY}T12:00:00.000Z`,
        [JOB_NAME_SUBSTITUTION]: 'nightly',
      },
    });
    const record = await storedRecord(collection, res.body.runId);
    assert.equal(record.status, 'completed');
    assert.match(record.notes.launch.name, new RegExp(`^${LOCATION}/builds/`));
    assert.equal(record.notes.launch.name, launches[0]?.name);
    assert.equal(record.notes.launch.adopted, false);
  });

  it('runs nothing for a duplicate delivery', async () => {
    const { trigger, triggerId } = aTrigger();
    const { request } = proxy(trigger);

    await request
      .post('/')
      .set(schedulerHeaders('nightly', `${PAST_DAY}T12:05:00Z`));
    const duplicate = await request
      .post('/')
      .set(schedulerHeaders('nightly', `${PAST_DAY}T12:05:00Z`));

    assert.equal(duplicate.body.outcome, 'duplicate');
    assert.equal(launchesOf(triggerId).length, 1);
  });

  const listsOf = () =>
    fake.lists.filter((l) => l.path === `/v1/${LOCATION}/builds`);
  const otherRun = (i: number) => ({
    triggerId: randomUUID(),
    source: { substitutions: { [RUN_ID_SUBSTITUTION]: String(i).repeat(64) } },
  });

  it('adopts the build an attempt started before it failed, without build_trigger_id and on the second page', async () => {
    const { trigger, triggerId } = aTrigger();
    let recordings = 0;
    const { request, collection } = proxy(
      trigger,
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
    // Newer builds of other runs push this run's build off the first page.
    for (let i = 0; i <= FAKE_PAGE_SIZE; i++) {
      fake.seed('cloud-build', LOCATION, otherRun(i));
    }
    const listsBefore = listsOf().length;

    const retry = await request
      .post('/')
      .set(schedulerHeaders('nightly', `${PAST_DAY}T12:10:00Z`));

    assert.equal(first.body.outcome, 'failed');
    assert.equal(retry.status, 200, JSON.stringify(retry.body));
    const launches = launchesOf(triggerId);
    assert.equal(launches.length, 1);
    const stored = await storedRecord(collection, retry.body.runId);
    assert.deepEqual(
      [stored.notes.launch.name, stored.notes.launch.adopted],
      [launches[0]?.name, true],
    );
    const looks = listsOf().slice(listsBefore);
    assert.ok(looks.length >= 2, 'the look read past the first page');
    assert.ok(
      looks[1]?.query.pageToken,
      'the second page was asked for with its token',
    );
    const [builds] = await client.listBuilds({ parent: LOCATION });
    const adopted = builds.find((b) => b.name === launches[0]?.name);
    assert.equal(
      adopted?.buildTriggerId ?? '',
      '',
      'the build carries no build_trigger_id',
    );
  });

  it("reads back only to the run's first claim: older builds end the look", async () => {
    const location = `projects/demo-${randomUUID().slice(0, 8)}/locations/europe-west1`;
    const trigger = `${location}/triggers/${randomUUID()}`;
    const twoDaysAgo = new Date(Date.now() - 2 * 86_400_000);
    for (let i = 0; i <= FAKE_PAGE_SIZE; i++) {
      fake.seed('cloud-build', location, otherRun(i), {
        createTime: twoDaysAgo,
      });
    }
    const { request } = proxy(trigger);

    const res = await request
      .post('/')
      .set(schedulerHeaders('nightly', `${PAST_DAY}T12:15:00Z`));

    assert.equal(res.status, 200, JSON.stringify(res.body));
    const looks = fake.lists.filter((l) => l.path === `/v1/${location}/builds`);
    assert.equal(looks.length, 1, 'one page: it ends before the window does');
    assert.equal(looks[0]?.query.filter, undefined, 'no filter');
  });

  it('the fake refuses a regional trigger or location on the project-only path, and any build filter', async () => {
    const { trigger, triggerId } = aTrigger();

    await assert.rejects(
      client.runBuildTrigger({
        name: trigger,
        projectId: 'demo-project',
        triggerId,
      }),
      /is regional: run it on its regional path/,
    );
    await assert.rejects(
      client.listBuilds({ parent: LOCATION, projectId: 'demo-project' }),
      /is regional: list it on its regional path/,
    );
    await assert.rejects(
      client.listBuilds({
        parent: LOCATION,
        filter: `trigger_id="${triggerId}"`,
      }),
      /shows no filter syntax/,
    );
    assert.equal(launchesOf(triggerId).length, 0);
  });

  it('refuses a trigger that is not a resource name, before any run', () => {
    assert.throws(
      () => createCloudBuildJob({ trigger: 'nightly-trigger', client }),
      /must be projects\/PROJECT\/locations\/REGION\/triggers\/TRIGGER_ID/,
    );
  });
});
