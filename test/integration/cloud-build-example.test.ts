/**
 * The Cloud Build proxy example (`examples/cloud-build/cloud-build-job.ts`) with the official client
 * (REST transport) against a local fake of the Cloud Build API: each run runs the trigger once with
 * the run id as a substitution, a duplicate delivery runs nothing, and a build an earlier attempt of
 * the run started is adopted instead of starting a second one.
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
import { noteLaunch, type RecordLaunch } from '../../examples/shared/launch-once.ts';
import {
  type FakeGoogleApis,
  LOCAL_TOKEN,
  localClientOptions,
  startFakeGoogleApis,
} from '../fixtures/fake-google-apis.ts';
import { schedulerHeaders, serve, storedRecord } from '../helpers.ts';

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
  function proxy(trigger: string, wrap = (record: RecordLaunch): RecordLaunch => record) {
    return serve(createCloudBuildJob({ trigger, client, recordLaunch: wrap(noteLaunch) }));
  }

  const launchesOf = (triggerId: string) =>
    fake.launches.filter((l) => l.target === 'cloud-build' && l.body.triggerId === triggerId);

  it('runs the trigger once with the run id, schedule time and job name as substitutions', async () => {
    const { trigger, triggerId } = aTrigger();
    const { request, collection } = proxy(trigger);

    const res = await request.post('/').set(schedulerHeaders('nightly', '2026-10-16T12:00:00Z'));

    assert.equal(res.status, 200, JSON.stringify(res.body));
    const launches = launchesOf(triggerId);
    assert.equal(launches.length, 1);
    assert.equal(launches[0]?.authorization, `Bearer ${LOCAL_TOKEN}`);
    // REST picks the first binding whose fields are set; the regional trigger rides along as `name`.
    assert.equal(launches[0]?.path, `/v1/projects/demo-project/triggers/${triggerId}:run`);
    assert.deepEqual(launches[0]?.body.source, {
      substitutions: {
        [RUN_ID_SUBSTITUTION]: res.body.runId,
        [SCHEDULE_TIME_SUBSTITUTION]: '2026-10-16T12:00:00.000Z',
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

    await request.post('/').set(schedulerHeaders('nightly', '2026-10-16T12:05:00Z'));
    const duplicate = await request
      .post('/')
      .set(schedulerHeaders('nightly', '2026-10-16T12:05:00Z'));

    assert.equal(duplicate.body.outcome, 'duplicate');
    assert.equal(launchesOf(triggerId).length, 1);
  });

  it('adopts the build an attempt started before it failed, and starts no second one', async () => {
    const { trigger, triggerId } = aTrigger();
    let recordings = 0;
    const { request, collection } = proxy(trigger, (record) => async (ctx, launch) => {
      if (++recordings === 1) throw new Error('the first attempt dies after its launch');
      await record(ctx, launch);
    });

    const first = await request.post('/').set(schedulerHeaders('nightly', '2026-10-16T12:10:00Z'));
    const retry = await request.post('/').set(schedulerHeaders('nightly', '2026-10-16T12:10:00Z'));

    assert.equal(first.body.outcome, 'failed');
    assert.equal(retry.status, 200, JSON.stringify(retry.body));
    const launches = launchesOf(triggerId);
    assert.equal(launches.length, 1);
    const stored = await storedRecord(collection, retry.body.runId);
    assert.deepEqual(
      [stored.notes.launch.name, stored.notes.launch.adopted],
      [launches[0]?.name, true],
    );
  });

  it("lists the trigger's builds with one call and starts its own build when none is of this run", async () => {
    const { trigger, triggerId } = aTrigger();
    fake.seed('cloud-build', LOCATION, {
      triggerId,
      source: { substitutions: { [RUN_ID_SUBSTITUTION]: 'f'.repeat(64) } },
    });
    const { request } = proxy(trigger);

    const res = await request.post('/').set(schedulerHeaders('nightly', '2026-10-16T12:15:00Z'));

    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(launchesOf(triggerId).length, 1);
    const lists = fake.lists.filter((l) => l.query.filter === `trigger_id="${triggerId}"`);
    assert.equal(lists.length, 1);
    assert.equal(lists[0]?.query.parent, LOCATION);
  });

  it('refuses a trigger that is not a resource name, before any run', () => {
    assert.throws(
      () => createCloudBuildJob({ trigger: 'nightly-trigger', client }),
      /must be projects\/PROJECT\/locations\/REGION\/triggers\/TRIGGER_ID/,
    );
  });
});
