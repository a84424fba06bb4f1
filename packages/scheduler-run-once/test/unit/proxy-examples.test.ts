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
import {
  runEnvironment,
  runIdOf,
} from '../../examples/cloud-run-job/cloud-run-job.ts';
import {
  EXIT_CODE_BY_OUTCOME,
  taskKey,
} from '../../examples/cloud-run-job/task.ts';
import {
  findSince,
  type Launch,
  LookIncompleteError,
  launchOnce,
  lookSince,
  nameOf,
  timestampToDate,
} from '../../examples/shared/launch-once.ts';
import {
  listRequest,
  runIdLabelValue,
} from '../../examples/workflows-proxy/workflows-job.ts';
import type { JobContext } from '../../src/core/job-context.ts';

const RUN_ID = '0123456789abcdef'.repeat(4);
const RUN = {
  runId: RUN_ID,
  scheduleTime: new Date('2026-10-16T12:00:00Z'),
  jobName: 'nightly',
};

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
    note: async () => {},
  };
}

describe('launchOnce', () => {
  it('launches when the look finds nothing, and records the launch', async () => {
    const recorded: Launch[] = [];

    const launch = await launchOnce(
      context(),
      {
        target: 't',
        find: async () => undefined,
        launch: async () => 'x/executions/1',
      },
      (_ctx, l) => void recorded.push(l),
    );

    assert.deepEqual(launch, {
      target: 't',
      name: 'x/executions/1',
      adopted: false,
    });
    assert.deepEqual(recorded, [launch]);
  });

  it('adopts what the look finds and launches nothing', async () => {
    let launched = 0;

    const launch = await launchOnce(context(), {
      target: 't',
      find: async () => 'x/executions/0',
      launch: async () => String(++launched),
    });

    assert.deepEqual(
      [launch.name, launch.adopted, launched],
      ['x/executions/0', true, 0],
    );
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
    assert.throws(
      () => nameOf('', 'execution'),
      /carries no name of the execution/,
    );
    assert.equal(nameOf('a/b', 'build'), 'a/b');
  });
});

describe('the look: newest first, back to the first claim', () => {
  /** A newest-first list in pages, counting the pages read. */
  /** An item of a list: its time, if any, and the run id it carries. */
  interface Item {
    readonly time?: Date;
    readonly runId: string;
  }
  function pages(...all: Item[][]) {
    const read = { pages: 0 };
    async function* items() {
      for (const page of all) {
        read.pages++;
        yield* page;
      }
    }
    return { items: items(), read };
  }
  const at = (iso: string, runId = 'other'): Item => ({
    time: new Date(iso),
    runId,
  });
  const look = {
    time: (i: Item) => i.time,
    matches: (i: Item) => i.runId === RUN_ID,
  };
  const since = new Date('2026-10-16T12:00:00Z');

  it('starts the window a day before the first claim, not at the schedule time', () => {
    const ctx = { firstClaimedAt: new Date('2026-10-16T12:05:00Z') };

    assert.equal(lookSince(ctx).toISOString(), '2026-10-15T12:05:00.000Z');
    assert.equal(lookSince(ctx, 0).toISOString(), '2026-10-16T12:05:00.000Z');
  });

  it('refuses the launch when it reads its limit without reaching the window’s start', async () => {
    const { items, read } = pages(
      [at('2026-10-16T12:09:00Z'), at('2026-10-16T12:08:00Z')],
      [at('2026-10-16T12:07:00Z'), at('2026-10-16T12:06:00Z', RUN_ID)],
    );

    await assert.rejects(
      findSince(items, since, look, 3),
      (err: unknown) =>
        err instanceof LookIncompleteError && err.reason === 'limit',
    );
    assert.equal(read.pages, 2);
  });

  it('refuses the launch when nothing matched and an item may be this run’s, not showing it yet', async () => {
    const { items } = pages([
      at('2026-10-16T12:09:00Z', 'pending'),
      at('2026-10-16T11:00:00Z'),
    ]);
    const undecided = { ...look, pending: (i: Item) => i.runId === 'pending' };

    await assert.rejects(
      findSince(items, since, undecided),
      (err: unknown) =>
        err instanceof LookIncompleteError && err.reason === 'pending',
    );
  });

  it('finds an execution of the run on a later page of the window', async () => {
    const { items, read } = pages(
      [at('2026-10-16T12:09:00Z'), at('2026-10-16T12:08:00Z')],
      [at('2026-10-16T12:07:00Z', RUN_ID)],
    );

    const found = await findSince(items, since, look);

    assert.deepEqual([found?.runId, read.pages], [RUN_ID, 2]);
  });

  it('stops at the first item older than the window and reads no further page', async () => {
    const { items, read } = pages(
      [at('2026-10-16T12:09:00Z'), at('2026-10-16T11:50:00Z')],
      [at('2026-10-16T11:40:00Z', RUN_ID)],
    );

    const found = await findSince(items, since, look);

    assert.deepEqual([found, read.pages], [undefined, 1]);
  });

  it('does not stop at an item without a time', async () => {
    const { items } = pages([
      { runId: 'other' },
      at('2026-10-16T12:01:00Z', RUN_ID),
    ]);

    assert.equal((await findSince(items, since, look))?.runId, RUN_ID);
  });

  it('reads protobuf timestamps as the clients decode them', () => {
    assert.equal(
      timestampToDate({
        seconds: '1792152000',
        nanos: 500_000_000,
      })?.toISOString(),
      '2026-10-16T12:00:00.500Z',
    );
    assert.equal(
      timestampToDate({
        seconds: { toString: () => '1792152000' },
      })?.toISOString(),
      '2026-10-16T12:00:00.000Z',
    );
    assert.equal(timestampToDate(undefined), undefined);
    assert.equal(timestampToDate({}), undefined);
  });
});

describe('how each target carries the run id', () => {
  it('Workflows: a label of the first 63 hex digits; the look lists newest first with no filter', () => {
    assert.equal(runIdLabelValue(RUN_ID), RUN_ID.slice(0, 63));
    assert.deepEqual(listRequest('projects/p/locations/l/workflows/w'), {
      parent: 'projects/p/locations/l/workflows/w',
      view: 'FULL',
      orderBy: 'startTime desc',
      pageSize: 100,
    });
  });

  it('Cloud Run jobs: environment overrides, read back from the execution template', () => {
    const env = runEnvironment(RUN);

    assert.deepEqual(env, [
      { name: 'SCHEDULER_RUN_ID', value: RUN_ID },
      { name: 'SCHEDULER_SCHEDULE_TIME', value: '2026-10-16T12:00:00.000Z' },
      { name: 'SCHEDULER_JOB_NAME', value: 'nightly' },
    ]);
    assert.equal(
      runIdOf({ template: { containers: [{ env: [] }, { env }] } }),
      RUN_ID,
    );
    assert.equal(
      runIdOf({
        template: { containers: [{ env: [{ name: 'X', value: '1' }] }] },
      }),
      undefined,
    );
    assert.equal(runIdOf({}), undefined);
  });

  it('Cloud Build: user substitutions, and the build named from its id when the answer has no name', () => {
    const ref = parseTrigger('projects/p/locations/us-central1/triggers/t-1');

    assert.deepEqual(ref, {
      project: 'p',
      location: 'us-central1',
      triggerId: 't-1',
    });
    assert.deepEqual(runSubstitutions(RUN), {
      _RUN_ID: RUN_ID,
      _SCHEDULE_TIME: '2026-10-16T12:00:00.000Z',
      _JOB_NAME: 'nightly',
    });
    assert.equal(
      buildName({ id: 'b1' }, ref),
      'projects/p/locations/us-central1/builds/b1',
    );
    assert.equal(buildName({ name: 'n', id: 'b1' }, ref), 'n');
    assert.throws(() => buildName({}, ref), /carries no name of the build/);
    assert.throws(
      () => parseTrigger('projects/p/triggers/t-1'),
      /must be projects\//,
    );
  });
});

describe('the Cloud Run task', () => {
  it('keys on the run id, and on the task index when an execution has several tasks', () => {
    assert.equal(taskKey({ SCHEDULER_RUN_ID: RUN_ID }), RUN_ID);
    assert.equal(
      taskKey({
        SCHEDULER_RUN_ID: RUN_ID,
        CLOUD_RUN_TASK_COUNT: '3',
        CLOUD_RUN_TASK_INDEX: '2',
      }),
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
