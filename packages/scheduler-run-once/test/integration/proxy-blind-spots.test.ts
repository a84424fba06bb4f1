/**
 * The three proxy examples under what the references leave open (issue 27), each modelled by the
 * fake Google APIs where a reference allows it: the API's clock six minutes behind Firestore's with
 * a newer execution of another run (all three), a queued Workflows execution without `startTime`,
 * a Cloud Run execution listed before its overrides show (and create times out of order), a
 * global Cloud Build trigger whose private pool runs its builds in another region, and a trigger
 * that drops or overrides the substitutions `triggers.run` passes. Each proxy launches at most once
 * per run, or refuses and says why. The first attempt of a run "dies" after its launch (its
 * recording throws, so the claim is released), as an instance killed between the two would.
 */

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { CloudBuildClient } from '@google-cloud/cloudbuild';
import {
  JobsClient,
  ExecutionsClient as RunExecutionsClient,
} from '@google-cloud/run';
import { ExecutionsClient as WorkflowsClient } from '@google-cloud/workflows';
import { createCloudBuildJob } from '../../examples/cloud-build/cloud-build-job.ts';
import {
  createCloudRunJob,
  RUN_ID_ENV,
} from '../../examples/cloud-run-job/cloud-run-job.ts';
import type { RecordLaunch } from '../../examples/shared/launch-once.ts';
import { noteLaunch } from '../../examples/shared/launch-once.ts';
import { createWorkflowsJob } from '../../examples/workflows-proxy/workflows-job.ts';
import type { JobRun } from '../../src/core/job-context.ts';
import { toUtcRfc3339 } from '../../src/policy/schedule.ts';
import {
  type FakeGoogleApis,
  type FakeTarget,
  localClientOptions,
  startFakeGoogleApis,
} from '../fixtures/fake-google-apis.ts';
import { schedulerHeaders, serve } from '../helpers.ts';

const PROJECT = 'projects/demo-project/locations';
const MINUTE = 60_000;

/**
 * A recent minute, as a schedule time, another on each call: a run id of its own for each run (a
 * Cloud Build look reads every build of the location, so two tests' runs of one slot would meet).
 */
let slotsTaken = 0;
function aSlot(): string {
  return toUtcRfc3339(
    new Date(Math.floor(Date.now() / MINUTE) * MINUTE - ++slotsTaken * MINUTE),
  );
}

/** A recorder whose first call throws: the first attempt dies after its launch. */
function diesOnce(): RecordLaunch {
  let calls = 0;
  return async (ctx, launch) => {
    if (++calls === 1) {
      throw new Error('the first attempt dies after its launch');
    }
    await noteLaunch(ctx, launch);
  };
}

describe('the proxies under what the references leave open', () => {
  let fake: FakeGoogleApis;
  let workflows: WorkflowsClient;
  let jobs: JobsClient;
  let executions: RunExecutionsClient;
  let builds: CloudBuildClient;

  before(async () => {
    fake = await startFakeGoogleApis();
    workflows = new WorkflowsClient(localClientOptions(fake.port));
    jobs = new JobsClient(localClientOptions(fake.port));
    executions = new RunExecutionsClient(localClientOptions(fake.port));
    builds = new CloudBuildClient(localClientOptions(fake.port));
  });
  after(async () => {
    await Promise.all([
      workflows.close(),
      jobs.close(),
      executions.close(),
      builds.close(),
    ]);
    await fake.close();
  });

  /** One proxy of each kind, on a target of its own: how to serve it and what it launched. */
  const proxies: {
    target: FakeTarget;
    make(record: RecordLaunch): {
      run: JobRun;
      parent: string;
      launched: () => number;
    };
  }[] = [
    {
      target: 'workflows',
      make(record) {
        const workflow = `${PROJECT}/us-central1/workflows/w-${randomUUID().slice(0, 8)}`;
        return {
          run: createWorkflowsJob({
            workflow,
            client: workflows,
            recordLaunch: record,
          }),
          parent: workflow,
          launched: () =>
            fake.launches.filter((l) => l.path === `/v1/${workflow}/executions`)
              .length,
        };
      },
    },
    {
      target: 'cloud-run-job',
      make(record) {
        const job = `${PROJECT}/us-central1/jobs/j-${randomUUID().slice(0, 8)}`;
        return {
          run: createCloudRunJob({
            job,
            jobsClient: jobs,
            executionsClient: executions,
            recordLaunch: record,
          }),
          parent: job,
          launched: () =>
            fake.launches.filter((l) => l.path === `/v2/${job}:run`).length,
        };
      },
    },
    {
      target: 'cloud-build',
      make(record) {
        const triggerId = randomUUID();
        const trigger = `${PROJECT}/us-central1/triggers/${triggerId}`;
        return {
          run: createCloudBuildJob({
            trigger,
            client: builds,
            recordLaunch: record,
          }),
          parent: `${PROJECT}/us-central1`,
          launched: () =>
            fake.launches.filter((l) => l.body.triggerId === triggerId).length,
        };
      },
    },
  ];

  /** What a launch of another run carries, per target, for `seed`. */
  const otherRun = (target: FakeTarget): Record<string, unknown> => {
    const runId = 'f'.repeat(64);
    if (target === 'workflows') {
      return { argument: JSON.stringify({ runId }) };
    }
    if (target === 'cloud-run-job') {
      return {
        overrides: {
          containerOverrides: [{ env: [{ name: RUN_ID_ENV, value: runId }] }],
        },
      };
    }
    return { source: { substitutions: { _RUN_ID: runId } } };
  };

  for (const { target, make } of proxies) {
    it(`${target}: launches once with the API's clock 6 min behind Firestore's and a newer execution of another run`, async () => {
      const proxy = make(diesOnce());
      const { request } = serve(proxy.run);
      const slot = aSlot();
      fake.clockOffsetMs = -6 * MINUTE;
      try {
        const first = await request
          .post('/')
          .set(schedulerHeaders('nightly', slot));
        fake.seed(target, proxy.parent, otherRun(target));
        const retry = await request
          .post('/')
          .set(schedulerHeaders('nightly', slot));

        assert.equal(first.body.outcome, 'failed');
        assert.equal(retry.status, 200, JSON.stringify(retry.body));
        assert.equal(proxy.launched(), 1, 'the retry adopted the first launch');
      } finally {
        fake.clockOffsetMs = 0;
      }
    });
  }

  it('workflows: adopts an execution waiting QUEUED in the backlog without a startTime', async () => {
    const workflow = `${PROJECT}/us-central1/workflows/w-${randomUUID().slice(0, 8)}`;
    const { request } = serve(
      createWorkflowsJob({
        workflow,
        client: workflows,
        recordLaunch: diesOnce(),
      }),
    );
    fake.seed('workflows', workflow, otherRun('workflows'), {
      createTime: new Date(Date.now() - 2 * 24 * 60 * MINUTE),
    });
    const slot = aSlot();
    fake.queueLaunches = true;
    try {
      const first = await request
        .post('/')
        .set(schedulerHeaders('nightly', slot));
      const retry = await request
        .post('/')
        .set(schedulerHeaders('nightly', slot));

      assert.equal(first.body.outcome, 'failed');
      assert.equal(retry.status, 200, JSON.stringify(retry.body));
      assert.equal(
        fake.launches.filter((l) => l.path === `/v1/${workflow}/executions`)
          .length,
        1,
      );
    } finally {
      fake.queueLaunches = false;
    }
  });

  it('cloud-run-job: refuses to launch beside an execution not showing its overrides yet, then adopts it', async () => {
    const job = `${PROJECT}/us-central1/jobs/j-${randomUUID().slice(0, 8)}`;
    const { request } = serve(
      createCloudRunJob({
        job,
        jobsClient: jobs,
        executionsClient: executions,
        recordLaunch: diesOnce(),
      }),
    );
    const slot = aSlot();
    fake.hideOverrides = true;
    try {
      const first = await request
        .post('/')
        .set(schedulerHeaders('nightly', slot));
      fake.hideOverrides = false;
      // Created after the launch, stamped ten minutes before it: create times out of order.
      fake.seed('cloud-run-job', job, otherRun('cloud-run-job'), {
        createTime: new Date(Date.now() - 10 * MINUTE),
      });
      const undecided = await request
        .post('/')
        .set(schedulerHeaders('nightly', slot));
      const retry = await request
        .post('/')
        .set(schedulerHeaders('nightly', slot));

      assert.deepEqual(
        [first.body.outcome, undecided.body.outcome, retry.body.outcome],
        ['failed', 'failed', 'processed'],
      );
      assert.match(undecided.body.message, /does not show a run id yet/);
      assert.equal(
        fake.launches.filter((l) => l.path === `/v2/${job}:run`).length,
        1,
      );
    } finally {
      fake.hideOverrides = false;
    }
  });

  it('cloud-run-job: an execution started without a run id (by hand) does not hold the launch', async () => {
    const job = `${PROJECT}/us-central1/jobs/j-${randomUUID().slice(0, 8)}`;
    fake.seed('cloud-run-job', job, {});
    const { request } = serve(
      createCloudRunJob({
        job,
        jobsClient: jobs,
        executionsClient: executions,
      }),
    );

    const res = await request
      .post('/')
      .set(schedulerHeaders('nightly', aSlot()));

    assert.equal(res.body.outcome, 'processed', JSON.stringify(res.body));
    assert.equal(
      fake.launches.filter((l) => l.path === `/v2/${job}:run`).length,
      1,
    );
  });

  it('cloud-build: a global trigger without buildLocation is refused at start, naming the setting', () => {
    const trigger = `${PROJECT}/global/triggers/${randomUUID()}`;

    assert.throws(
      () => createCloudBuildJob({ trigger, client: builds }),
      /is global: .*Set buildLocation/,
    );
    assert.throws(
      () =>
        createCloudBuildJob({
          trigger: `${PROJECT}/us-central1/triggers/t`,
          buildLocation: 'europe-west1',
          client: builds,
        }),
      /differs from the trigger's region us-central1/,
    );
  });

  it("cloud-build: a global trigger's build in its private pool's region is found there", async () => {
    const triggerId = randomUUID();
    const trigger = `${PROJECT}/global/triggers/${triggerId}`;
    fake.triggers.set(trigger, { poolLocation: 'europe-west1' });
    const { request } = serve(
      createCloudBuildJob({
        trigger,
        buildLocation: 'europe-west1',
        client: builds,
        recordLaunch: diesOnce(),
      }),
    );
    const slot = aSlot();

    const first = await request
      .post('/')
      .set(schedulerHeaders('nightly', slot));
    const retry = await request
      .post('/')
      .set(schedulerHeaders('nightly', slot));

    assert.equal(first.body.outcome, 'failed');
    assert.equal(retry.status, 200, JSON.stringify(retry.body));
    assert.equal(
      fake.launches.filter((l) => l.body.triggerId === triggerId).length,
      1,
    );
    const looked = fake.lists
      .filter((l) => l.target === 'cloud-build')
      .map((l) => l.path);
    assert.ok(
      looked.includes(`/v1/${PROJECT}/europe-west1/builds`),
      looked.join(', '),
    );
  });

  it('cloud-build: refuses to run a trigger that declares _RUN_ID itself, and launches nothing', async () => {
    const triggerId = randomUUID();
    const trigger = `${PROJECT}/us-central1/triggers/${triggerId}`;
    fake.triggers.set(trigger, { substitutions: { _RUN_ID: 'default' } });
    const { request } = serve(createCloudBuildJob({ trigger, client: builds }));

    const res = await request
      .post('/')
      .set(schedulerHeaders('nightly', aSlot()));

    assert.equal(res.body.outcome, 'failed');
    assert.match(
      res.body.message,
      /declares _RUN_ID among its own substitutions.*nodejs-cloudbuild#117/,
    );
    assert.equal(
      fake.launches.filter((l) => l.body.triggerId === triggerId).length,
      0,
    );
  });

  it('cloud-build: a trigger that drops the passed substitutions runs once, then is refused', async () => {
    const triggerId = randomUUID();
    const trigger = `${PROJECT}/us-central1/triggers/${triggerId}`;
    fake.triggers.set(trigger, { dropsRunSubstitutions: true });
    const { request } = serve(createCloudBuildJob({ trigger, client: builds }));

    const first = await request
      .post('/')
      .set(schedulerHeaders('nightly', aSlot()));
    const next = await request
      .post('/')
      .set(schedulerHeaders('nightly', aSlot()));

    assert.equal(
      first.body.outcome,
      'processed',
      'the build started is not started again',
    );
    assert.equal(next.body.outcome, 'failed');
    assert.match(next.body.message, /drops or overrides the substitutions/);
    assert.equal(
      fake.launches.filter((l) => l.body.triggerId === triggerId).length,
      1,
    );
  });
});
