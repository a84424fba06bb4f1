/**
 * `npm run trigger` and `npm run runs -- --backfill` against a function listening on 127.0.0.1
 * (the handler on the emulator): a manual run, a slot delivered as Scheduler would, a deliberate
 * re-run that the history shows with 2 attempts, and a backfill of 3 missed slots. The commands
 * run in this process (`test/fixtures/in-process-command.ts`), but for the cases named "as a
 * process": what `npm run trigger` users run, its exit status and a backfill without a terminal.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { getTestServer } from '@google-cloud/functions-framework/testing';
import { ROOT } from '../../src/dev/local-processes.ts';
import * as runsCommand from '../../src/ops/runs.ts';
import * as triggerCommand from '../../src/ops/trigger.ts';
import { defineJob, validateJobs } from '../../src/policy/job-declaration.ts';
import { slotRunId } from '../../src/policy/run-history.ts';
import {
  type Command,
  type CommandResult,
  runInProcess,
} from '../fixtures/in-process-command.ts';
import { jobs as historyJobs } from '../fixtures/jobs-history.ts';
import { jobs as overlapJobs } from '../fixtures/jobs-overlap.ts';
import {
  PAST_DAY,
  schedulerHeaders,
  serveJobs,
  storedRecord,
  until,
} from '../helpers.ts';

/** Absolute: the commands in this process resolve it from its current directory. */
const JOBS_MODULE = join(ROOT, 'test/fixtures/jobs-history.ts');

/** The commands by their script, as the process cases name them. */
const COMMANDS: Record<string, Command> = {
  'src/ops/trigger.ts': {
    name: 'trigger',
    usage: triggerCommand.USAGE,
    main: triggerCommand.main,
  },
  'src/ops/runs.ts': {
    name: 'runs',
    usage: runsCommand.USAGE,
    main: runsCommand.main,
  },
};

/**
 * The environment of every command here: a year's retention (as `serveJobs` gives the function),
 * far beyond the slots here (on PAST_DAY, yesterday); tests of the retention rule pass their own.
 */
function commandEnv(extraEnv: Record<string, string>): NodeJS.ProcessEnv {
  return {
    ...process.env,
    JOBS_MODULE,
    RETENTION_SECONDS: '31536000',
    ...extraEnv,
  };
}

/** Runs an ops command in this process, where the function it calls runs too. */
function command(script: string, ...args: string[]): Promise<CommandResult> {
  return commandWith({}, script, ...args);
}

/** {@link command} with extra environment variables. */
function commandWith(
  extraEnv: Record<string, string>,
  script: string,
  ...args: string[]
): Promise<CommandResult> {
  const ops = COMMANDS[script];
  if (ops === undefined) {
    throw new Error(`no command ${script}`);
  }
  return runInProcess(ops, args, commandEnv(extraEnv));
}

/**
 * Runs an ops command as a process, as `npm run` does; asynchronously, since the function it calls
 * runs in this process.
 */
function spawned(
  script: string,
  ...args: string[]
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], {
      cwd: ROOT,
      env: commandEnv({}),
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
            executions.push(
              `${ctx.kind} ${ctx.scheduleTime.toISOString()} ${ctx.runId}`,
            );
          },
        }),
      ),
    );
    fn = serveJobs(jobs);
    const server = getTestServer(fn.name);
    await new Promise<void>((resolve) =>
      server.listen(0, '127.0.0.1', resolve),
    );
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    close = () => server.close();
  });
  after(() => close());

  it('as a process, trigger JOB makes a manual run of its own, recorded as manual', async () => {
    const res = await spawned(
      'src/ops/trigger.ts',
      'history-five',
      '--url',
      url,
    );

    assert.equal(res.code, 0, res.stderr);
    assert.match(
      res.stdout,
      /^history-five manual run \(trigger [0-9a-f-]{36}\): 200 processed /,
    );
    const runId = /processed ([0-9a-f]{12})/.exec(res.stdout)?.[1] ?? '';
    const manual = executions.find((e) => e.startsWith('manual'));
    assert.ok(
      manual?.includes(` ${runId}`),
      `a manual execution with run id ${runId}`,
    );
    const history = await command(
      'src/ops/runs.ts',
      '--json',
      '--since',
      '10m',
      '--collection',
      fn.collection,
    );
    const rows = JSON.parse(history.stdout) as {
      kind: string;
      state: string;
      runId: string;
    }[];
    assert.deepEqual(
      rows
        .filter((r) => r.kind === 'manual')
        .map((r) => [r.state, r.runId.slice(0, 12)]),
      [['completed', runId]],
      'the history lists the manual run',
    );
  });

  it('trigger JOB --slot T delivers the slot as Scheduler would: processed, then a duplicate', async () => {
    const first = await command(
      'src/ops/trigger.ts',
      'history-five',
      '--slot',
      `${PAST_DAY}T11:00:00Z`,
      '--url',
      url,
    );
    const again = await command(
      'src/ops/trigger.ts',
      'history-five',
      '--slot',
      `${PAST_DAY}T11:00:00Z`,
      '--url',
      url,
    );

    assert.equal(first.code, 0, first.stderr);
    assert.match(
      first.stdout,
      new RegExp(`^history-five ${PAST_DAY}T11:00:00Z: 200 processed`),
    );
    assert.match(again.stdout, /: 200 duplicate .*Run already completed/);
  });

  it('trigger JOB --rerun --slot T runs a completed slot again as a run of its own, listed beside the slot', async () => {
    const slot = `${PAST_DAY}T11:05:00Z`;
    await command(
      'src/ops/trigger.ts',
      'history-five',
      '--slot',
      slot,
      '--url',
      url,
    );

    const rerun = await command(
      'src/ops/trigger.ts',
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
    const rerunLine = executions.find((e) =>
      e.startsWith(`rerun ${PAST_DAY}T11:05:00.000Z `),
    );
    const rerunId = rerunLine?.split(' ')[2] ?? '';
    assert.notEqual(rerunId, runId);
    assert.equal((await storedRecord(fn.collection, rerunId)).rerun_of, runId);
    const history = await command(
      'src/ops/runs.ts',
      '--json',
      '--since',
      '10m',
      '--now',
      `${PAST_DAY}T11:06:00Z`,
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
      'src/ops/trigger.ts',
      'history-five',
      '--slot',
      `${PAST_DAY}T11:03:00Z`,
      '--url',
      url,
    );

    assert.equal(res.code, 2);
    assert.match(
      res.stderr,
      new RegExp(
        `is not a slot of history-five .*the slot before it is ${PAST_DAY}T11:00:00Z`,
      ),
    );
  });

  it('runs --backfill delivers the 3 missed slots oldest first, and then every slot has run', async () => {
    for (const time of ['12:00', '12:20']) {
      await fn.request
        .post('/')
        .set(schedulerHeaders('history-five', `${PAST_DAY}T${time}:00Z`));
    }
    const window = [
      '--since',
      '25m',
      '--now',
      `${PAST_DAY}T12:25:00Z`,
      '--collection',
      fn.collection,
    ];

    const backfill = await command(
      'src/ops/runs.ts',
      ...window,
      '--backfill',
      '--yes',
      '--url',
      url,
    );
    const check = await command('src/ops/runs.ts', ...window, '--check');

    assert.equal(backfill.code, 0, backfill.stderr);
    const lines = backfill.stdout
      .split('\n')
      .filter((l) => l.startsWith('backfill'));
    assert.deepEqual(
      lines.map((l) =>
        /(\d\d:\d\d):00Z: (\d+ \w+)/.exec(l)?.slice(1).join(' '),
      ),
      ['12:05 200 processed', '12:10 200 processed', '12:15 200 processed'],
    );
    assert.equal(check.code, 0, check.stderr);
    assert.match(
      backfill.stderr,
      /3 missed slot\(s\) to deliver, oldest first/,
    );
  });

  it('a slot whose on-time delivery a clock 5 minutes behind took for a forced run is that run: --check green, --backfill delivers nothing, listed once', async () => {
    let now = new Date(`${PAST_DAY}T13:00:05Z`);
    const own = serveJobs(
      validateJobs(historyJobs),
      {},
      { clock: async () => now },
    );
    for (const [slot, at] of [
      ['13:00', '13:00:05'],
      ['13:05', '13:00:10'], // on time, but this instance's clock says 5 minutes early
      ['13:10', '13:10:05'],
    ] as const) {
      now = new Date(`${PAST_DAY}T${at}Z`);
      await own.request
        .post('/')
        .set(schedulerHeaders('history-five', `${PAST_DAY}T${slot}:00Z`));
    }
    const window = [
      '--since',
      '12m',
      '--now',
      `${PAST_DAY}T13:12:00Z`,
      '--collection',
      own.collection,
    ];

    const check = await command('src/ops/runs.ts', ...window, '--check');
    const backfill = await command(
      'src/ops/runs.ts',
      ...window,
      '--backfill',
      '--dry-run',
    );
    const listed = await command('src/ops/runs.ts', ...window, '--json');

    assert.equal(check.code, 0, check.stderr);
    assert.equal(backfill.code, 0, backfill.stderr);
    assert.match(backfill.stderr, /0 missed slot\(s\) to deliver/);
    const rows = JSON.parse(listed.stdout) as {
      slot: string;
      kind: string;
      state: string;
    }[];
    assert.deepEqual(
      rows.map((r) => [r.slot.slice(11, 16), r.kind, r.state]),
      [
        ['13:00', 'slot', 'completed'],
        ['13:05', 'slot', 'completed'],
        ['13:10', 'slot', 'completed'],
      ],
    );
  });

  describe('runs --backfill shows before it delivers, and never a slot that may have run', () => {
    /** A fresh collection with records at 12:00 and 12:20 of history-five: 12:05-12:15 missed. */
    async function missedThree(): Promise<{
      collection: string;
      window: string[];
    }> {
      const own = serveJobs(validateJobs(historyJobs));
      for (const time of ['12:00', '12:20']) {
        await own.request
          .post('/')
          .set(schedulerHeaders('history-five', `${PAST_DAY}T${time}:00Z`));
      }
      const window = [
        '--since',
        '25m',
        '--now',
        `${PAST_DAY}T12:25:00Z`,
        '--collection',
        own.collection,
      ];
      return { collection: own.collection, window };
    }
    const delivered = (stdout: string) =>
      stdout.split('\n').filter((l) => l.startsWith('backfill'));

    it('as a process without a terminal and without --yes, lists the slots and delivers nothing, saying why', async () => {
      const { window } = await missedThree();

      const res = await spawned(
        'src/ops/runs.ts',
        ...window,
        '--backfill',
        '--url',
        url,
      );

      assert.equal(res.code, 1);
      assert.match(
        res.stderr,
        new RegExp(
          `3 missed slot\\(s\\) to deliver[\\s\\S]*${PAST_DAY}T12:05:00Z[\\s\\S]*no terminal to confirm on; .* pass --yes`,
        ),
      );
      assert.deepEqual(delivered(res.stdout), []);
    });

    it('--dry-run lists the slots and delivers nothing', async () => {
      const { window } = await missedThree();

      const res = await command(
        'src/ops/runs.ts',
        ...window,
        '--backfill',
        '--dry-run',
        '--url',
        url,
      );

      assert.equal(res.code, 0, res.stderr);
      assert.match(
        res.stderr,
        /3 missed slot\(s\) to deliver[\s\S]*--dry-run: nothing delivered/,
      );
      assert.deepEqual(delivered(res.stdout), []);
    });

    it('leaves alone the slots older than RETENTION_SECONDS, even with --yes', async () => {
      const { window } = await missedThree();

      // 900 s back from 12:25, plus the job's 60 s tolerance: 12:11 is the oldest slot allowed.
      const res = await commandWith(
        { RETENTION_SECONDS: '900' },
        'src/ops/runs.ts',
        ...window,
        '--backfill',
        '--yes',
        '--url',
        url,
      );

      assert.equal(res.code, 0, res.stderr);
      assert.match(
        res.stderr,
        /2 missed slot\(s\) left alone: older than RETENTION_SECONDS \(900 s\)/,
      );
      assert.deepEqual(
        delivered(res.stdout).map((l) => /(\d\d:\d\d):00Z: /.exec(l)?.[1]),
        ['12:15'],
      );
    });

    it('delivers nothing where the job has no record in the window (a fresh emulator, or records the TTL deleted)', async () => {
      const window = [
        '--since',
        '25m',
        '--now',
        `${PAST_DAY}T12:25:00Z`,
        '--collection',
        `fresh_${Date.now()}`,
      ];

      const res = await command(
        'src/ops/runs.ts',
        ...window,
        '--backfill',
        '--yes',
        '--url',
        url,
      );

      assert.equal(res.code, 0, res.stderr);
      assert.match(
        res.stderr,
        /0 missed slot\(s\) to deliver[\s\S]*left alone: not judged \(before first record\), as the table shows them/,
      );
      assert.deepEqual(delivered(res.stdout), []);
    });

    it('refuses a retention the job’s retries could outlive, naming both', async () => {
      const { window } = await missedThree();

      const res = await commandWith(
        { RETENTION_SECONDS: '60', LEASE_SECONDS: '30' },
        'src/ops/runs.ts',
        ...window,
        '--backfill',
        '--dry-run',
      );

      assert.equal(res.code, 1);
      assert.match(
        res.stderr,
        /RETENTION_SECONDS \(60\) must exceed the retry window of job history-five \(15 s/,
      );
    });
  });

  it('trigger --slot refuses a slot older than RETENTION_SECONDS, and the function refuses it too', async () => {
    const slot = `${PAST_DAY}T11:10:00Z`;

    const res = await commandWith(
      { RETENTION_SECONDS: '3600' },
      'src/ops/trigger.ts',
      'history-five',
      '--slot',
      slot,
      '--url',
      url,
    );
    const direct = serveJobs(validateJobs(historyJobs), {
      env: { RETENTION_SECONDS: '3600' },
    });
    const answer = await direct.request
      .post('/')
      .set(schedulerHeaders('history-five', slot));

    assert.equal(res.code, 2);
    assert.match(
      res.stderr,
      new RegExp(
        `--slot ${PAST_DAY}T11:10:00Z is older than RETENTION_SECONDS \\(3600 s`,
      ),
    );
    assert.deepEqual(
      [answer.status, answer.body.outcome],
      [400, 'invalid_request'],
    );
    assert.match(answer.body.message, /older than RETENTION_SECONDS \(3600 s/);
  });
});

describe('running jobs by hand in a key scope (RUN_KEY_SCOPE_HEADERS=x-tenant, RUN_KEY_SCOPE_PARAMS=region)', () => {
  const SCOPE_ENV = {
    RUN_KEY_SCOPE_HEADERS: 'x-tenant',
    RUN_KEY_SCOPE_PARAMS: 'region',
  };
  const ACME_EU = ['--scope', 'X-Tenant=acme', '--scope', 'region=eu'];
  /** The scope the function computes for x-tenant: acme, ?region=eu. */
  const acmeEu: [string, string][] = [
    ['header:x-tenant', 'acme'],
    ['query:region', 'eu'],
  ];
  const executions: string[] = [];
  let fn: ReturnType<typeof serveJobs>;
  let url = '';
  let close = () => {};
  const scoped = (script: string, ...args: string[]) =>
    commandWith(SCOPE_ENV, script, ...args);
  before(async () => {
    const jobs = validateJobs(
      historyJobs.map((job) =>
        defineJob({
          ...job,
          run: (ctx) => void executions.push(`${ctx.kind} ${ctx.runId}`),
        }),
      ),
    );
    fn = serveJobs(jobs, { env: SCOPE_ENV });
    const server = getTestServer(fn.name);
    await new Promise<void>((resolve) =>
      server.listen(0, '127.0.0.1', resolve),
    );
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    close = () => server.close();
  });
  after(() => close());

  it('trigger --scope sends each value as the header or query parameter the function reads: the slot’s run id is the scope’s', async () => {
    const slot = `${PAST_DAY}T10:00:00Z`;

    const res = await scoped(
      'src/ops/trigger.ts',
      'history-five',
      '--slot',
      slot,
      ...ACME_EU,
      '--url',
      url,
    );

    assert.equal(res.code, 0, res.stderr);
    assert.match(
      res.stdout,
      new RegExp(
        `^history-five ${PAST_DAY}T10:00:00Z \\[scope x-tenant=acme region=eu\\]: 200 processed`,
      ),
    );
    const runId = slotRunId('history-five', new Date(slot), acmeEu);
    assert.ok(
      res.stdout.includes(runId.slice(0, 12)),
      `run id ${runId.slice(0, 12)} in ${res.stdout}`,
    );
    assert.equal(
      (await storedRecord(fn.collection, runId)).status,
      'completed',
    );
    assert.doesNotMatch(res.stderr, /named the run/);
  });

  it('trigger warns, without failing the run it made, when the function names the run otherwise (the scopes differ)', async () => {
    const res = await commandWith(
      { ...SCOPE_ENV, RUN_KEY_SCOPE: 'elsewhere' },
      'src/ops/trigger.ts',
      'history-five',
      ...ACME_EU,
      '--url',
      url,
    );

    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /200 processed/);
    assert.match(
      res.stderr,
      /the function named the run [0-9a-f]{64}, not [0-9a-f]{64} as this command computes it: its key scope/,
    );
  });

  it('trigger --scope makes a manual run in the scope', async () => {
    const before = executions.length;

    const res = await scoped(
      'src/ops/trigger.ts',
      'history-five',
      ...ACME_EU,
      '--url',
      url,
    );

    assert.equal(res.code, 0, res.stderr);
    assert.match(
      res.stdout,
      /manual run \(trigger [0-9a-f-]{36}\) \[scope x-tenant=acme region=eu\]: 200 processed/,
    );
    assert.doesNotMatch(
      res.stderr,
      /named the run/,
      'the manual run’s id is the one trigger computes',
    );
    assert.deepEqual(
      executions.slice(before).map((e) => e.split(' ')[0]),
      ['manual'],
    );
  });

  it('trigger without a configured scope value exits 2 naming every missing one, and delivers nothing', async () => {
    const before = executions.length;

    const res = await scoped(
      'src/ops/trigger.ts',
      'history-five',
      '--scope',
      'region=eu',
      '--url',
      url,
    );

    assert.equal(res.code, 2);
    assert.match(
      res.stderr,
      /--scope x-tenant=VALUE is missing \(scope header\)/,
    );
    assert.match(
      res.stderr,
      /RUN_KEY_SCOPE_HEADERS: x-tenant; RUN_KEY_SCOPE_PARAMS: region/,
    );
    assert.equal(executions.length, before);
  });

  it('trigger --scope with a name the configuration does not have exits 2, listing the names it has', async () => {
    const res = await scoped(
      'src/ops/trigger.ts',
      'history-five',
      ...ACME_EU,
      '--scope',
      'tenant=acme',
      '--url',
      url,
    );

    assert.equal(res.code, 2);
    assert.match(
      res.stderr,
      /--scope tenant: the configuration has no scope header or parameter tenant \(RUN_KEY_SCOPE_HEADERS: x-tenant; RUN_KEY_SCOPE_PARAMS: region\)/,
    );
  });

  it('runs --backfill --scope delivers the scope’s missed slots with its headers and parameters; --check in that scope is then green', async () => {
    const collection = fn.collection;
    for (const time of ['12:00', '12:20']) {
      await fn.request.post('/?region=eu').set({
        ...schedulerHeaders('history-five', `${PAST_DAY}T${time}:00Z`),
        'X-Tenant': 'acme',
      });
    }
    const window = [
      '--since',
      '25m',
      '--now',
      `${PAST_DAY}T12:25:00Z`,
      '--collection',
      collection,
    ];

    const backfill = await scoped(
      'src/ops/runs.ts',
      ...window,
      ...ACME_EU,
      '--backfill',
      '--yes',
      '--url',
      url.replace(/\/$/, `/?region=us`),
    );
    const check = await scoped(
      'src/ops/runs.ts',
      ...window,
      ...ACME_EU,
      '--check',
    );

    assert.equal(backfill.code, 0, backfill.stderr);
    const lines = backfill.stdout
      .split('\n')
      .filter((l) => l.startsWith('backfill'));
    assert.deepEqual(
      lines.map((l) =>
        /(\d\d:\d\d):00Z: (\d+ \w+)/.exec(l)?.slice(1).join(' '),
      ),
      ['12:05 200 processed', '12:10 200 processed', '12:15 200 processed'],
    );
    assert.equal(check.code, 0, check.stderr);
  });

  it('runs --backfill stops with exit 1 when the function names a delivery’s run otherwise than the listing (the scopes differ)', async () => {
    const window = [
      '--since',
      '25m',
      '--now',
      `${PAST_DAY}T14:25:00Z`,
      '--collection',
      fn.collection,
    ];

    const backfill = await commandWith(
      { ...SCOPE_ENV, RUN_KEY_SCOPE: 'elsewhere' },
      'src/ops/runs.ts',
      ...window,
      ...ACME_EU,
      '--backfill',
      '--include-before-first-record',
      '--yes',
      '--url',
      url,
    );

    assert.equal(backfill.code, 1);
    assert.match(
      backfill.stderr,
      /the function ran it as [0-9a-f]{64}, not the listed [0-9a-f]{64}: its key scope/,
    );
    assert.equal(
      backfill.stdout.split('\n').filter((l) => l.startsWith('backfill'))
        .length,
      1,
      'nothing delivered after the first mismatch',
    );
  });
});

describe('by hand into a job with overlap "skip", while one of its runs still runs', () => {
  const env = { JOBS_MODULE: join(ROOT, 'test/fixtures/jobs-overlap.ts') };
  /** A five-minute slot two hours ago: slots relative to the clock, never a fixed date. */
  const base = Math.floor((Date.now() - 2 * 3_600_000) / 300_000) * 300_000;
  const slotAt = (minutes: number) =>
    new Date(base + minutes * 60_000).toISOString().replace('.000Z', 'Z');
  const executions: string[] = [];
  let fn: ReturnType<typeof serveJobs>;
  let url = '';
  let finish = () => {};
  let running: Promise<unknown> = Promise.resolve();
  let close = () => {};
  before(async () => {
    const gate = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const jobs = validateJobs(
      overlapJobs.map((job) =>
        defineJob({
          ...job,
          run: async (ctx) => {
            executions.push(`${ctx.kind} ${ctx.scheduleTime.toISOString()}`);
            if (ctx.scheduleTime.getTime() === Date.parse(slotAt(20))) {
              await gate;
            }
          },
        }),
      ),
    );
    fn = serveJobs(jobs);
    const server = getTestServer(fn.name);
    await new Promise<void>((resolve) =>
      server.listen(0, '127.0.0.1', resolve),
    );
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    close = () => server.close();
    // 12:00 ran; 12:20 runs until the end of these tests; 12:05-12:15 were missed.
    await fn.request.post('/').set(schedulerHeaders('overlap-five', slotAt(0)));
    running = fn.request
      .post('/')
      .set(schedulerHeaders('overlap-five', slotAt(20)))
      .then((r) => r);
    await until(() => executions.length === 2);
  });
  after(async () => {
    finish();
    await running;
    close();
  });
  const window = () => [
    '--since',
    '25m',
    '--now',
    slotAt(25),
    '--collection',
    fn.collection,
  ];

  it('runs --backfill says the blocked slots were not run, exits 1, and --check still reports them missed', async () => {
    const backfill = await commandWith(
      env,
      'src/ops/runs.ts',
      ...window(),
      '--backfill',
      '--yes',
      '--url',
      url,
    );
    const check = await commandWith(
      env,
      'src/ops/runs.ts',
      ...window(),
      '--check',
    );

    assert.equal(backfill.code, 1, backfill.stderr);
    const lines = backfill.stdout
      .split('\n')
      .filter((l) => l.startsWith('backfill'));
    assert.deepEqual(
      lines.map((l) => /: (\d+ \w+)/.exec(l)?.[1]),
      ['409 waiting', '409 waiting', '409 waiting'],
    );
    assert.match(
      backfill.stderr,
      /3 of 3 slot\(s\) not run .*they stay missed/,
    );
    assert.equal(check.code, 1, check.stderr);
    assert.equal(
      (check.stderr.match(/missed/g) ?? []).length >= 3,
      true,
      check.stderr,
    );
    assert.equal(executions.length, 2, 'nothing ran beside the running slot');
  });

  it('trigger JOB is not run beside it: it says so and exits 1; with --allow-overlap it runs', async () => {
    const blocked = await commandWith(
      env,
      'src/ops/trigger.ts',
      'overlap-five',
      '--url',
      url,
    );
    const allowed = await commandWith(
      env,
      'src/ops/trigger.ts',
      'overlap-five',
      '--allow-overlap',
      '--url',
      url,
    );

    assert.equal(blocked.code, 1, blocked.stderr);
    assert.match(blocked.stdout, /409 waiting/);
    assert.match(
      blocked.stderr,
      /not run: another run of overlap-five is still running.*--allow-overlap/,
    );
    assert.equal(allowed.code, 0, allowed.stderr);
    assert.match(allowed.stdout, /200 processed/);
    assert.equal(executions.filter((e) => e.startsWith('manual')).length, 1);
  });

  it('trigger --slot T --allow-overlap is refused: a slot follows the job’s overlap policy', async () => {
    const res = await commandWith(
      env,
      'src/ops/trigger.ts',
      'overlap-five',
      '--slot',
      slotAt(5),
      '--allow-overlap',
      '--url',
      url,
    );

    assert.equal(res.code, 2);
    assert.match(
      res.stderr,
      /--allow-overlap goes with a manual run or --rerun/,
    );
  });
});
