/**
 * The downstream side of the Cloud Run job example (`examples/cloud-run-job/task.ts` and its entry
 * point `task-main.ts`) on the Firestore emulator: two executions of the Cloud Run job for one run
 * id, and only one does the state-changing step.
 */

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { Firestore } from '@google-cloud/firestore';
import {
  RUN_ID_ENV,
  SCHEDULE_TIME_ENV,
} from '../../examples/cloud-run-job/cloud-run-job.ts';
import {
  runTaskOnce,
  type TaskContext,
} from '../../examples/cloud-run-job/task.ts';
import { RunLedger } from '../../src/core/ledger.ts';
import { ROOT, spawnGroup } from '../../src/dev/local-processes.ts';
import {
  captureLogs,
  freshCollection,
  PAST_NOON_MS,
  until,
} from '../helpers.ts';

const PROJECT = process.env.GOOGLE_CLOUD_PROJECT ?? 'demo-scheduler-run-once';

/** A run id as the proxy makes them: 64 hex. */
function aRunId(): string {
  return (randomUUID() + randomUUID()).replaceAll('-', '');
}

/** One execution's container: a Firestore client and a ledger of its own, as in another process. */
function container(collection: string) {
  const db = new Firestore({ projectId: PROJECT });
  const ledger = RunLedger.open(db, {
    collection,
    leaseMs: 60_000,
    retentionMs: 86_400_000,
    timeoutMs: 10_000,
  });
  return { ledger, close: () => db.terminate() };
}

describe('examples/cloud-run-job: the task', () => {
  it('does the work in one of two concurrent executions of a run; the other exits 1 to retry', async () => {
    const collection = freshCollection('tasks');
    const [a, b] = [container(collection), container(collection)];
    const env = {
      [RUN_ID_ENV]: aRunId(),
      [SCHEDULE_TIME_ENV]: new Date(PAST_NOON_MS).toISOString(),
    };
    const done: TaskContext[] = [];
    let finish = () => {};
    const held = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const work = async (task: TaskContext) => {
      done.push(task);
      await held; // the first execution is still working when the second one starts
    };
    const { logger } = captureLogs();

    const first = runTaskOnce({ env, ledger: a.ledger, work, logger });
    await until(() => done.length === 1);
    const second = await runTaskOnce({ env, ledger: b.ledger, work, logger });
    finish();
    const results = [await first, second];

    assert.deepEqual(
      results.map((r) => [r.outcome, r.exitCode]),
      [
        ['processed', 0],
        ['in_progress', 1],
      ],
    );
    assert.equal(done.length, 1);
    assert.equal(
      done[0]?.scheduleTime?.toISOString(),
      new Date(PAST_NOON_MS).toISOString(),
    );
    await Promise.all([a.close(), b.close()]);
  });

  it('skips the work in an execution of a run that is already done, and exits 0', async () => {
    const collection = freshCollection('tasks');
    const { ledger, close } = container(collection);
    const env = { [RUN_ID_ENV]: aRunId() };
    let works = 0;
    const { logger } = captureLogs();

    await runTaskOnce({ env, ledger, work: () => void works++, logger });
    const again = await runTaskOnce({
      env,
      ledger,
      work: () => void works++,
      logger,
    });

    assert.deepEqual(
      [again.outcome, again.exitCode, works],
      ['duplicate', 0, 1],
    );
    await close();
  });

  it('refuses an execution without a run id (not started by the proxy), doing nothing', async () => {
    const { ledger, close } = container(freshCollection('tasks'));
    let works = 0;
    const { logger, lines } = captureLogs();

    const result = await runTaskOnce({
      env: {},
      ledger,
      work: () => void works++,
      logger,
    });

    assert.deepEqual(
      [result.outcome, result.exitCode, works],
      ['no_run_id', 1, 0],
    );
    assert.match(
      String(lines().at(-1)?.message),
      /SCHEDULER_RUN_ID is missing/,
    );
    await close();
  });

  it('runs the entry point as two processes for one run id: one does the step, both exit as told', async () => {
    const collection = freshCollection('tasks');
    const env = {
      ...process.env,
      [RUN_ID_ENV]: aRunId(),
      TASK_RUNS_COLLECTION: collection,
      GOOGLE_CLOUD_PROJECT: PROJECT,
      NODE_ENV: 'test',
    };
    const spawnTask = () =>
      spawnGroup(process.execPath, ['examples/cloud-run-job/task-main.ts'], {
        cwd: ROOT,
        env,
      });

    const tasks = [spawnTask(), spawnTask()];
    await Promise.all(tasks.map((t) => t.exited));

    const output = tasks.map((t) => t.output()).join('\n');
    assert.equal(
      output.match(/the state-changing step ran/g)?.length,
      1,
      output,
    );
    const codes = tasks.map((t) => t.exitCode).sort();
    // The other one found the run in progress (exit 1: Cloud Run retries it) or already done (0).
    assert.ok(
      JSON.stringify(codes) === '[0,0]' || JSON.stringify(codes) === '[0,1]',
      `exit codes ${codes}\n${output}`,
    );
  });
});
