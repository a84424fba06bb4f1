/**
 * `npm run trigger` and `npm run runs -- --backfill` as processes, against a function listening on
 * 127.0.0.1 (the handler on the emulator): a manual run, a slot delivered as Scheduler would, a
 * deliberate re-run that the history shows with 2 attempts, and a backfill of 3 missed slots.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { getTestServer } from '@google-cloud/functions-framework/testing';
import { ROOT } from '../../scripts/local-processes.ts';
import { defineJob, validateJobs } from '../../src/policy/job-declaration.ts';
import { slotRunId } from '../../src/policy/run-history.ts';
import { jobs as historyJobs } from '../fixtures/jobs-history.ts';
import { schedulerHeaders, serveJobs, storedRecord } from '../helpers.ts';

const JOBS_MODULE = 'test/fixtures/jobs-history.ts';

/** Runs an ops command; asynchronously, since the function it calls runs in this process. */
function command(
  script: string,
  ...args: string[]
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], {
      cwd: ROOT,
      env: { ...process.env, JOBS_MODULE },
      timeout: 30_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('running jobs by hand', () => {
  const executions: string[] = [];
  let fn: ReturnType<typeof serveJobs>;
  let url = '';
  let close = () => {};
  before(async () => {
    const jobs = validateJobs(
      historyJobs.map((job) =>
        defineJob({
          ...job,
          run: (ctx) => {
            executions.push(`${ctx.kind} ${ctx.scheduleTime.toISOString()} ${ctx.runId}`);
          },
        }),
      ),
    );
    fn = serveJobs(jobs);
    const server = getTestServer(fn.name);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    close = () => server.close();
  });
  after(() => close());

  it('trigger JOB makes a manual run of its own, recorded as manual', async () => {
    const res = await command('ops/trigger.ts', 'history-five', '--url', url);

    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /^history-five manual run \(trigger [0-9a-f-]{36}\): 200 processed /);
    const runId = /processed ([0-9a-f]{12})/.exec(res.stdout)?.[1] ?? '';
    const manual = executions.find((e) => e.startsWith('manual'));
    assert.ok(manual?.includes(` ${runId}`), `a manual execution with run id ${runId}`);
    const history = await command(
      'ops/runs.ts',
      '--json',
      '--since',
      '10m',
      '--collection',
      fn.collection,
    );
    const rows = JSON.parse(history.stdout) as { kind: string; state: string; runId: string }[];
    assert.deepEqual(
      rows.filter((r) => r.kind === 'manual').map((r) => [r.state, r.runId.slice(0, 12)]),
      [['completed', runId]],
      'the history lists the manual run',
    );
  });

  it('trigger JOB --slot T delivers the slot as Scheduler would: processed, then a duplicate', async () => {
    const first = await command(
      'ops/trigger.ts',
      'history-five',
      '--slot',
      '2026-10-16T11:00:00Z',
      '--url',
      url,
    );
    const again = await command(
      'ops/trigger.ts',
      'history-five',
      '--slot',
      '2026-10-16T11:00:00Z',
      '--url',
      url,
    );

    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /^history-five 2026-10-16T11:00:00Z: 200 processed/);
    assert.match(again.stdout, /: 200 duplicate .*Run already completed/);
  });

  it('trigger JOB --rerun --slot T runs a completed slot again as a run of its own, listed beside the slot', async () => {
    const slot = '2026-10-16T11:05:00Z';
    await command('ops/trigger.ts', 'history-five', '--slot', slot, '--url', url);

    const rerun = await command(
      'ops/trigger.ts',
      'history-five',
      '--rerun',
      '--slot',
      slot,
      '--url',
      url,
    );

    assert.equal(rerun.code, 0, rerun.stderr);
    assert.match(rerun.stdout, /re-run \(trigger .*\): 200 processed/);
    const runId = slotRunId('history-five', new Date(slot), []);
    const record = await storedRecord(fn.collection, runId);
    assert.equal(record.attempts, 1, 'the slot’s record is untouched');
    const rerunLine = executions.find((e) => e.startsWith(`rerun 2026-10-16T11:05:00.000Z `));
    const rerunId = rerunLine?.split(' ')[2] ?? '';
    assert.notEqual(rerunId, runId);
    assert.equal((await storedRecord(fn.collection, rerunId)).rerun_of, runId);
    const history = await command(
      'ops/runs.ts',
      '--json',
      '--since',
      '10m',
      '--now',
      '2026-10-16T11:06:00Z',
      '--collection',
      fn.collection,
    );
    const rows = (
      JSON.parse(history.stdout) as {
        slot: string;
        kind: string;
        runId: string;
        rerunOf?: string;
      }[]
    ).filter((r) => r.slot === slot);
    assert.deepEqual(
      rows.map((r) => [r.kind, r.runId, r.rerunOf]),
      [
        ['slot', runId, undefined],
        ['rerun', rerunId, runId],
      ],
    );
  });

  it('refuses a time that is not a slot of the job, naming the slot before it', async () => {
    const res = await command(
      'ops/trigger.ts',
      'history-five',
      '--slot',
      '2026-10-16T11:03:00Z',
      '--url',
      url,
    );

    assert.equal(res.code, 2);
    assert.match(
      res.stderr,
      /is not a slot of history-five .*the slot before it is 2026-10-16T11:00:00Z/,
    );
  });

  it('runs --backfill delivers the 3 missed slots oldest first, and then every slot has run', async () => {
    for (const time of ['12:00', '12:20']) {
      await fn.request.post('/').set(schedulerHeaders('history-five', `2026-10-16T${time}:00Z`));
    }
    const window = [
      '--since',
      '25m',
      '--now',
      '2026-10-16T12:25:00Z',
      '--collection',
      fn.collection,
    ];

    const backfill = await command('ops/runs.ts', ...window, '--backfill', '--url', url);
    const check = await command('ops/runs.ts', ...window, '--check');

    assert.equal(backfill.code, 0, backfill.stderr);
    const lines = backfill.stdout.split('\n').filter((l) => l.startsWith('backfill'));
    assert.deepEqual(
      lines.map((l) => /(\d\d:\d\d):00Z: (\d+ \w+)/.exec(l)?.slice(1).join(' ')),
      ['12:05 200 processed', '12:10 200 processed', '12:15 200 processed'],
    );
    assert.equal(check.code, 0, check.stderr);
  });
});
