/**
 * The Workflows proxy example (`examples/workflows-proxy/workflows-job.ts`) with the official client
 * (REST transport) against a local fake of the Workflows executions API (the real API is
 * unreachable here): the execution's argument and label carry the run id, a duplicate delivery
 * starts no second execution, and an execution an earlier attempt of the run started is adopted
 * wherever it sits in the look's window. The fake pages two executions at a time and refuses the
 * filter forms the reference does not show.
 */

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { ExecutionsClient } from '@google-cloud/workflows';
import {
  noteLaunch,
  type RecordLaunch,
} from '../../examples/shared/launch-once.ts';
import {
  createWorkflowsJob,
  listRequest,
  RUN_ID_LABEL,
  runIdLabelValue,
  type WorkflowArgument,
} from '../../examples/workflows-proxy/workflows-job.ts';
import { computeRunId } from '../../src/core/run-key.ts';
import { normaliseScheduleTime } from '../../src/function/scheduler-request.ts';
import {
  FAKE_PAGE_SIZE,
  type FakeGoogleApis,
  LOCAL_TOKEN,
  localClientOptions,
  startFakeGoogleApis,
} from '../fixtures/fake-google-apis.ts';
import { PAST_DAY, schedulerHeaders, serve, storedRecord } from '../helpers.ts';

/** A workflow of its own for each test, so executions never mix. */
function aWorkflow(): string {
  return `projects/demo-project/locations/us-central1/workflows/nightly-${randomUUID().slice(0, 8)}`;
}

describe('examples/workflows-proxy', () => {
  let fake: FakeGoogleApis;
  let client: ExecutionsClient;

  before(async () => {
    fake = await startFakeGoogleApis();
    client = new ExecutionsClient(localClientOptions(fake.port));
  });
  after(async () => {
    await client.close();
    await fake.close();
  });

  /** The proxy in a function on the emulator, recording launches in its own run records. */
  function proxy(
    workflow: string,
    wrap = (record: RecordLaunch): RecordLaunch => record,
  ) {
    return serve(
      createWorkflowsJob({ workflow, client, recordLaunch: wrap(noteLaunch) }),
    );
  }

  const launchesOf = (workflow: string) =>
    fake.launches.filter((l) => l.path === `/v1/${workflow}/executions`);

  it('starts one execution whose argument and label carry the run id', async () => {
    const workflow = aWorkflow();
    const { request, collection } = proxy(workflow);

    const res = await request
      .post('/')
      .set(schedulerHeaders('nightly', `${PAST_DAY}T12:00:00Z`));

    assert.equal(res.status, 200, JSON.stringify(res.body));
    const launches = launchesOf(workflow);
    assert.equal(launches.length, 1);
    assert.equal(launches[0]?.authorization, `Bearer ${LOCAL_TOKEN}`);
    const argument = JSON.parse(
      String(launches[0]?.body.argument),
    ) as WorkflowArgument;
    assert.deepEqual(argument, {
      runId: res.body.runId,
      jobName: 'nightly',
      scheduleTime: `${PAST_DAY}T12:00:00.000Z`,
    });
    assert.deepEqual(launches[0]?.body.labels, {
      [RUN_ID_LABEL]: res.body.runId.slice(0, 63),
    });
    const record = await storedRecord(collection, res.body.runId);
    assert.deepEqual(
      [record.status, record.notes.launch.name],
      ['completed', launches[0]?.name],
    );
  });

  it('starts no second execution for a duplicate delivery', async () => {
    const workflow = aWorkflow();
    const { request } = proxy(workflow);

    await request
      .post('/')
      .set(schedulerHeaders('nightly', `${PAST_DAY}T12:05:00Z`));
    const duplicate = await request
      .post('/')
      .set(schedulerHeaders('nightly', `${PAST_DAY}T12:05:00Z`));

    assert.equal(duplicate.body.outcome, 'duplicate');
    assert.equal(launchesOf(workflow).length, 1);
  });

  const listsOf = (workflow: string) =>
    fake.lists.filter((l) => l.path === `/v1/${workflow}/executions`);

  it('adopts the execution an attempt started before it failed, found on the second page of the window', async () => {
    const workflow = aWorkflow();
    let recordings = 0;
    const { request, collection } = proxy(
      workflow,
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
      fake.seed('workflows', workflow, {
        argument: JSON.stringify({ runId: String(i).repeat(64) }),
      });
    }
    const listsBefore = listsOf(workflow).length;

    const retry = await request
      .post('/')
      .set(schedulerHeaders('nightly', `${PAST_DAY}T12:10:00Z`));

    assert.equal(first.body.outcome, 'failed');
    assert.equal(retry.status, 200, JSON.stringify(retry.body));
    const launches = launchesOf(workflow);
    assert.equal(launches.length, 1);
    const stored = await storedRecord(collection, retry.body.runId);
    assert.deepEqual(
      [stored.notes.launch.name, stored.notes.launch.adopted],
      [launches[0]?.name, true],
    );
    const looks = listsOf(workflow).slice(listsBefore);
    assert.equal(looks.length, 2, 'the look read two pages');
    assert.deepEqual(
      [looks[0]?.query.view, looks[0]?.query.orderBy, looks[0]?.query.filter],
      ['FULL', 'startTime desc', undefined],
    );
    assert.ok(
      looks[1]?.query.pageToken,
      'the second page was asked for with its token',
    );
  });

  it("reads back only to the run's first claim: older executions end the look", async () => {
    const workflow = aWorkflow();
    const twoDaysAgo = new Date(Date.now() - 2 * 86_400_000);
    for (let i = 0; i <= FAKE_PAGE_SIZE; i++) {
      fake.seed(
        'workflows',
        workflow,
        { argument: JSON.stringify({ runId: String(i).repeat(64) }) },
        { createTime: twoDaysAgo },
      );
    }
    const { request } = proxy(workflow);

    const res = await request
      .post('/')
      .set(schedulerHeaders('nightly', `${PAST_DAY}T12:12:00Z`));

    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(launchesOf(workflow).length, 1);
    const looks = listsOf(workflow);
    assert.deepEqual(
      looks.map((l) => l.query.filter),
      [undefined, 'state="QUEUED"'],
      'one page of the ordered list (it ends before the window does), then the backlog',
    );
  });

  it('lists with documented parameters only; the fake refuses a filter form the reference does not show', async () => {
    const workflow = aWorkflow();

    const [documented] = await client.listExecutions(
      { ...listRequest(workflow), filter: 'state="SUCCEEDED"' },
      { autoPaginate: false },
    );

    assert.deepEqual(documented, []);
    await assert.rejects(
      client.listExecutions(
        { parent: workflow, filter: `labels.${RUN_ID_LABEL}="x"` },
        { autoPaginate: false },
      ),
      /the reference shows no filter of the form/,
    );
  });

  it('does not adopt an execution whose label matches but whose argument is of another run', async () => {
    const workflow = aWorkflow();
    const scheduleTime = normaliseScheduleTime(`${PAST_DAY}T12:15:00Z`);
    const runId = computeRunId({ jobName: 'nightly', scheduleTime, scope: [] });
    // Another run whose id shares the first 63 hex digits (the label value) but not the 64th.
    const sibling = `${runId.slice(0, 63)}${runId.endsWith('0') ? '1' : '0'}`;
    fake.seed('workflows', workflow, {
      argument: JSON.stringify({ runId: sibling }),
      labels: { [RUN_ID_LABEL]: runIdLabelValue(sibling) },
    });
    const { request } = proxy(workflow);

    const res = await request
      .post('/')
      .set(schedulerHeaders('nightly', scheduleTime));

    assert.equal(res.body.runId, runId);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(launchesOf(workflow).length, 1);
  });
});
