/**
 * The pure parts of the proxy examples: how each target carries the run id and finds it again, the
 * look-before-launch decision with stand-in calls, and the Cloud Run task's key and exit codes.
 */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import {
  buildName,
  parseTrigger,
  runSubstitutions,
} from '../../examples/cloud-build/cloud-build-job.ts';
import { runEnvironment, runIdOf } from '../../examples/cloud-run-job/cloud-run-job.ts';
import { EXIT_CODE_BY_OUTCOME, taskKey } from '../../examples/cloud-run-job/task.ts';
import { type Launch, launchOnce, nameOf } from '../../examples/shared/launch-once.ts';
import { runFilter, runIdLabelValue } from '../../examples/workflows-proxy/workflows-job.ts';
import type { JobContext } from '../../src/core/job-context.ts';

const RUN_ID = '0123456789abcdef'.repeat(4);
const RUN = { runId: RUN_ID, scheduleTime: new Date('2026-10-16T12:00:00Z'), jobName: 'nightly' };

function context(signal = new AbortController().signal): JobContext {
  return {
    ...RUN,
    attemptId: 'attempt-1',
    firstClaimedAt: new Date('2026-10-16T12:00:01Z'),
    leaseExpires: new Date(),
    signal,
    logger: pino({ level: 'silent' }),
    job: { id: 'nightly', schedule: '* * * * *', timeZone: 'Etc/UTC' },
    kind: 'slot',
    rerun: 0,
    note: async () => {},
  };
}

describe('launchOnce', () => {
  it('launches when the look finds nothing, and records the launch', async () => {
    const recorded: Launch[] = [];

    const launch = await launchOnce(
      context(),
      { target: 't', find: async () => undefined, launch: async () => 'x/executions/1' },
      (_ctx, l) => void recorded.push(l),
    );

    assert.deepEqual(launch, { target: 't', name: 'x/executions/1', adopted: false });
    assert.deepEqual(recorded, [launch]);
  });

  it('adopts what the look finds and launches nothing', async () => {
    let launched = 0;

    const launch = await launchOnce(context(), {
      target: 't',
      find: async () => 'x/executions/0',
      launch: async () => String(++launched),
    });

    assert.deepEqual([launch.name, launch.adopted, launched], ['x/executions/0', true, 0]);
  });

  it('does not launch once the attempt was told to stop (its lease is lost)', async () => {
    const controller = new AbortController();
    let launched = 0;

    const attempt = launchOnce(context(controller.signal), {
      target: 't',
      find: async () => {
        controller.abort(new Error('lease lost'));
        return undefined;
      },
      launch: async () => String(++launched),
    });

    await assert.rejects(attempt, /lease lost/);
    assert.equal(launched, 0);
  });

  it('refuses an answer without a resource name', () => {
    assert.throws(() => nameOf('', 'execution'), /carries no name of the execution/);
    assert.equal(nameOf('a/b', 'build'), 'a/b');
  });
});

describe('how each target carries the run id', () => {
  it('Workflows: a label of the first 63 hex digits, found with an AIP-160 label filter', () => {
    assert.equal(runIdLabelValue(RUN_ID), RUN_ID.slice(0, 63));
    assert.equal(runFilter(RUN_ID), `labels.scheduler_run_id="${RUN_ID.slice(0, 63)}"`);
  });

  it('Cloud Run jobs: environment overrides, read back from the execution template', () => {
    const env = runEnvironment(RUN);

    assert.deepEqual(env, [
      { name: 'SCHEDULER_RUN_ID', value: RUN_ID },
      { name: 'SCHEDULER_SCHEDULE_TIME', value: '2026-10-16T12:00:00.000Z' },
      { name: 'SCHEDULER_JOB_NAME', value: 'nightly' },
    ]);
    assert.equal(runIdOf({ template: { containers: [{ env: [] }, { env }] } }), RUN_ID);
    assert.equal(
      runIdOf({ template: { containers: [{ env: [{ name: 'X', value: '1' }] }] } }),
      undefined,
    );
    assert.equal(runIdOf({}), undefined);
  });

  it('Cloud Build: user substitutions, and the build named from its id when the answer has no name', () => {
    const ref = parseTrigger('projects/p/locations/us-central1/triggers/t-1');

    assert.deepEqual(ref, { project: 'p', location: 'us-central1', triggerId: 't-1' });
    assert.deepEqual(runSubstitutions(RUN), {
      _RUN_ID: RUN_ID,
      _SCHEDULE_TIME: '2026-10-16T12:00:00.000Z',
      _JOB_NAME: 'nightly',
    });
    assert.equal(buildName({ id: 'b1' }, ref), 'projects/p/locations/us-central1/builds/b1');
    assert.equal(buildName({ name: 'n', id: 'b1' }, ref), 'n');
    assert.throws(() => buildName({}, ref), /carries no name of the build/);
    assert.throws(() => parseTrigger('projects/p/triggers/t-1'), /must be projects\//);
  });
});

describe('the Cloud Run task', () => {
  it('keys on the run id, and on the task index when an execution has several tasks', () => {
    assert.equal(taskKey({ SCHEDULER_RUN_ID: RUN_ID }), RUN_ID);
    assert.equal(
      taskKey({ SCHEDULER_RUN_ID: RUN_ID, CLOUD_RUN_TASK_COUNT: '3', CLOUD_RUN_TASK_INDEX: '2' }),
      `${RUN_ID}-task-2`,
    );
    assert.equal(taskKey({ SCHEDULER_RUN_ID: 'not-a-run-id' }), undefined);
    assert.equal(taskKey({}), undefined);
  });

  it('exits 0 only when the work is done, by this execution or an earlier one', () => {
    const done = Object.entries(EXIT_CODE_BY_OUTCOME)
      .filter(([, code]) => code === 0)
      .map(([outcome]) => outcome);

    assert.deepEqual(done, ['processed', 'duplicate']);
  });
});
