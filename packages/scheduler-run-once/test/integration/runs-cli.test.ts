/**
 * `npm run runs` (`src/ops/runs.ts`) against the emulator: slots delivered with gaps and failures
 * through the real handler show up with the right states and attempt counts, and `--check` fails
 * on a missed or finally failed slot and passes when every slot ran. The command runs in this
 * process (`test/fixtures/in-process-command.ts`), but for the cases named "as a process": its exit
 * statuses as `npm run runs` users get them, and the metadata server probe it quiets in its own
 * process (`process.env`, which this process has quieted already).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it, type TestContext } from 'node:test';
import { Timestamp } from '@google-cloud/firestore';
import { ROOT } from '../../src/dev/local-processes.ts';
import * as runsCommand from '../../src/ops/runs.ts';
import { defineJob, validateJobs } from '../../src/policy/job-declaration.ts';
import { jobStateCollection } from '../../src/policy/job-state.ts';
import { checkDocumentId } from '../../src/policy/missed-run-cursor.ts';
import { type Command, runInProcess } from '../fixtures/in-process-command.ts';
import { jobs as historyJobs } from '../fixtures/jobs-history.ts';
import { jobs as weeklyJobs } from '../fixtures/jobs-weekly.ts';
import { firestore, schedulerHeaders, serveJobs } from '../helpers.ts';

/** Absolute: the command in this process resolves it from its current directory. */
const JOBS_MODULE = join(ROOT, 'test/fixtures/jobs-history.ts');
const DAY_MS = 86_400_000;
/** How long one `npm run runs` may take (a 40-day window takes seconds; a loaded machine, more). */
const RUNS_TIMEOUT_MS = 90_000;
const RUNS: Command = {
  name: 'runs',
  usage: runsCommand.USAGE,
  main: runsCommand.main,
};

/** The UTC day of `ms` as `YYYY-MM-DD`. */
function isoDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** The day `days` after `day` (`YYYY-MM-DD`). */
function dayAfter(day: string, days: number): string {
  return isoDay(Date.parse(`${day}T00:00:00Z`) + days * DAY_MS);
}

/** Yesterday (UTC), the day of the slots below: past and within the retention on any date. */
const DAY = isoDay(Date.now() - DAY_MS);
/** A Monday nine days ago or more, for the weekly job: its next Monday and the day after are past. */
const MONDAY = (() => {
  const ms = Date.now() - 9 * DAY_MS;
  return isoDay(ms - ((new Date(ms).getUTCDay() + 6) % 7) * DAY_MS);
})();

function runs(collection: string, ...args: string[]) {
  return runsOf(JOBS_MODULE, collection, ...args);
}

function runsOf(jobsModule: string, collection: string, ...args: string[]) {
  return runsWith({}, jobsModule, collection, ...args);
}

/**
 * The command's environment: this process's, with `extraEnv` (the deployed function's, e.g.
 * RUN_KEY_SCOPE), and without METADATA_SERVER_DETECTION, as a user's shell has it: the command
 * quiets the probe itself.
 */
function runsEnv(
  extraEnv: Record<string, string>,
  jobsModule: string,
): NodeJS.ProcessEnv {
  const { METADATA_SERVER_DETECTION: _, ...env } = process.env;
  return { ...env, JOBS_MODULE: jobsModule, ...extraEnv };
}

/** {@link runsOf} with extra environment variables, in this process. */
function runsWith(
  extraEnv: Record<string, string>,
  jobsModule: string,
  collection: string,
  ...args: string[]
) {
  return runInProcess(
    RUNS,
    ['--collection', collection, ...args],
    runsEnv(extraEnv, jobsModule),
    RUNS_TIMEOUT_MS,
  );
}

/** {@link runs} as a process, as `npm run runs` runs it. */
function runsProcess(collection: string, ...args: string[]) {
  const result = spawnSync(
    process.execPath,
    ['src/ops/runs.ts', '--collection', collection, ...args],
    {
      cwd: ROOT,
      env: runsEnv({}, JOBS_MODULE),
      encoding: 'utf8',
      timeout: RUNS_TIMEOUT_MS,
    },
  );
  assert.equal(
    result.error,
    undefined,
    `npm run runs ${args.join(' ')} did not finish in ${RUNS_TIMEOUT_MS} ms: ${result.error?.message}\n${result.stderr}`,
  );
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('npm run runs', () => {
  let collection = '';
  const executions: string[] = [];
  before(async () => {
    // The fixture's job, run by a counting function that fails the first attempt of 12:10 and
    // every attempt of 12:15.
    const failures = new Set([`${DAY}T12:10:00.000Z`, `${DAY}T12:15:00.000Z`]);
    const jobs = validateJobs(
      historyJobs.map((job) =>
        defineJob({
          ...job,
          run: (ctx) => {
            const slot = ctx.scheduleTime.toISOString();
            executions.push(slot);
            if (slot === `${DAY}T12:15:00.000Z` || failures.delete(slot)) {
              throw new Error(`downstream refused ${slot}`);
            }
          },
        }),
      ),
    );
    const fn = serveJobs(jobs);
    collection = fn.collection;
    const deliver = (time: string) =>
      fn.request.post('/').set(schedulerHeaders('history-five', time));
    // 12:05 never delivered (a gap); 12:10 fails, then its retry works; 12:15 fails for good.
    for (const time of ['12:00', '12:10', '12:10', '12:15', '12:20', '12:25']) {
      await deliver(`${DAY}T${time}:00Z`);
    }
  });

  it('shows each slot of the window with its state, attempts and error, as JSON', async () => {
    const { code, stdout } = await runs(
      collection,
      '--json',
      '--since',
      '30m',
      '--now',
      `${DAY}T12:30:00Z`,
    );

    assert.equal(code, 0);
    const rows = JSON.parse(stdout) as {
      slot: string;
      state: string;
      attempts: number;
      final: boolean;
      lastError: string | null;
      runId: string;
    }[];
    assert.deepEqual(
      rows.map((r) => [r.slot.slice(11, 16), r.state, r.attempts]),
      [
        ['12:00', 'completed', 1],
        ['12:05', 'missed', 0],
        ['12:10', 'completed', 2],
        ['12:15', 'failed', 1],
        ['12:20', 'completed', 1],
        ['12:25', 'completed', 1],
        ['12:30', 'pending', 0],
      ],
    );
    assert.equal(rows[3]?.final, true, 'failed past its 15 s retry window');
    assert.equal(rows[3]?.lastError, `downstream refused ${DAY}T12:15:00.000Z`);
    assert.equal(rows[6]?.final, false);
    assert.ok(rows.every((r) => /^[0-9a-f]{64}$/.test(r.runId)));
    assert.equal(
      executions.filter((e) => e.startsWith(`${DAY}T12:10`)).length,
      2,
    );
  });

  it('as a process, --check exits 1 on a missed or finally failed slot, naming it and the command that fixes it, and no probe warning', () => {
    const { code, stderr } = runsProcess(
      collection,
      '--check',
      '--since',
      '30m',
      '--now',
      `${DAY}T12:30:00Z`,
    );

    assert.equal(code, 1);
    assert.match(
      stderr,
      new RegExp(
        `history-five ${DAY}T12:05:00Z missed: npm run trigger -- history-five --slot ${DAY}T12:05:00Z\\n`,
      ),
    );
    assert.match(
      stderr,
      new RegExp(
        `history-five ${DAY}T12:15:00Z failed: npm run trigger -- history-five --slot ${DAY}T12:15:00Z\\n`,
      ),
    );
    assert.doesNotMatch(stderr, /Warning/);
  });

  it('--html FILE writes the same rows as one page, instead of the table', async (t) => {
    const file = join(scratchDir(t, 'runs-html-'), 'runs.html');
    const { code, stdout, stderr } = await runs(
      collection,
      '--html',
      file,
      '--since',
      '30m',
      '--now',
      `${DAY}T12:30:00Z`,
    );
    const page = readFileSync(file, 'utf8');

    assert.equal(code, 0, stderr);
    assert.equal(stdout, '');
    assert.match(stderr, /runs: wrote .*runs\.html \(7 rows\)/);
    assert.equal(page.match(/data-state="/g)?.length, 7);
    assert.match(page, /data-state="failed"/);
    assert.match(page, /<h2>history-five<\/h2>/);
  });

  it('--check exits 0 when every slot of the window ran, printing no table, only that it found nothing', async () => {
    const { code, stdout, stderr } = await runs(
      collection,
      '--check',
      '--since',
      '10m',
      '--now',
      `${DAY}T12:27:00Z`,
    );

    assert.equal(code, 0);
    assert.equal(stdout, '');
    assert.match(
      stderr,
      /^runs --check: no problem in 2 slots and runs of 1 job$/m,
    );
  });

  it('--check prints only the problem lines, never the table', async () => {
    const { code, stdout, stderr } = await runs(
      collection,
      '--check',
      '--since',
      '30m',
      '--now',
      `${DAY}T12:30:00Z`,
    );

    assert.equal(code, 1);
    assert.equal(stdout, '');
    assert.deepEqual(
      stderr
        .trim()
        .split('\n')
        .map((line) => line.split(': ')[1]),
      [
        `history-five ${DAY}T12:05:00Z missed`,
        `history-five ${DAY}T12:15:00Z failed`,
      ],
    );
  });

  it('as a process, refuses a bad window, a bad job id, or --check of an undeclared id, with exit 2 and what to write', () => {
    const badSince = runsProcess(collection, '--since', 'yesterday');
    const badJob = runsProcess(collection, '--job', 'no pe');
    const checkUndeclared = runsProcess(collection, '--job', 'nope', '--check');

    assert.equal(badSince.code, 2);
    assert.match(
      badSince.stderr,
      /"yesterday" is not a duration: .* e\.g\. 90m, 24h, 30d/,
    );
    assert.equal(badJob.code, 2);
    assert.match(badJob.stderr, /--job "no pe" is not a job id/);
    assert.equal(checkUndeclared.code, 2);
    assert.match(
      checkUndeclared.stderr,
      /nope is not declared \(declared: history-five\)/,
    );
  });

  it('--check on a window of more than 10,000 slots judges the newest, never the oldest', async () => {
    // 40 days of a five-minute job: 11,520 slots; the records are all in the last half hour.
    const { code, stderr } = await runs(
      collection,
      '--check',
      '--since',
      '40d',
      '--now',
      `${DAY}T12:30:00Z`,
    );

    assert.equal(code, 1, stderr);
    assert.match(
      stderr,
      /history-five: the window holds more than 10000 slots; showing the newest \d+, from/,
    );
    assert.match(stderr, new RegExp(`history-five ${DAY}T12:05:00Z missed`));
  });

  it('--check exits 3 when a window too large to judge holds no problem among its newest slots', async () => {
    const { code, stderr } = await runs(
      collection,
      '--check',
      '--since',
      '40d',
      '--now',
      `${DAY}T12:03:00Z`,
    );

    assert.equal(code, 3, stderr);
    assert.match(stderr, /the window is too large to judge .* narrow --since/);
  });

  it('shows the records of an id that is no longer declared, each marked undeclared', async () => {
    // The same job under its old id: records written by a function that still declared it.
    const renamed = validateJobs([
      defineJob({
        ...historyJobs[0],
        id: 'history-old',
        run: () => {},
      } as never),
    ]);
    const old = serveJobs(renamed, { collection });
    await old.request
      .post('/')
      .set(schedulerHeaders('history-old', `${DAY}T11:55:00Z`));

    const { code, stdout, stderr } = await runs(
      collection,
      '--job',
      'history-old',
      '--since',
      '1h',
      '--json',
      '--now',
      `${DAY}T12:30:00Z`,
    );

    assert.equal(code, 0, stderr);
    const rows = JSON.parse(stdout) as {
      job: string;
      slot: string;
      state: string;
      mark: string;
    }[];
    assert.deepEqual(
      rows.map((r) => [r.job, r.slot, r.state, r.mark]),
      [['history-old', `${DAY}T11:55:00Z`, 'completed', 'undeclared']],
    );
  });

  it('refuses --job of an id neither declared nor ever recorded (a typo) with exit 2, naming the declared ids', async () => {
    const typo = await runs(
      collection,
      '--job',
      'history-fiev',
      '--since',
      '1h',
    );
    const oldOutsideWindow = await runs(
      collection,
      '--job',
      'history-old',
      '--since',
      '1m',
    );

    assert.equal(typo.code, 2, typo.stderr);
    assert.match(
      typo.stderr,
      /no declared job history-fiev, and no record of it \(declared: history-five\)/,
    );
    assert.equal(oldOutsideWindow.code, 0, oldOutsideWindow.stderr);
    assert.match(
      oldOutsideWindow.stderr,
      /history-old: not declared, and no record of it in the window/,
    );
  });

  it("lists a job's manual runs, newest first, with thousands of other jobs' manual runs in the collection", async () => {
    const own = collection.replace(/$/, '-manual');
    const fn = serveJobs(
      validateJobs(
        historyJobs.map((job) => defineJob({ ...job, run: () => {} })),
      ),
      { collection: own },
    );
    for (const id of ['trigger-one-aaaa', 'trigger-two-bbbb']) {
      const answer = await fn.request.post('/').set({
        ...schedulerHeaders('history-five', `${DAY}T12:20:00Z`),
        'X-Run-Once-Mode': 'manual',
        'X-Run-Once-Trigger-Id': id,
      });
      assert.equal(answer.status, 200, answer.text);
    }
    // 3,000 other jobs' manual runs, copies of one, with ids that sort before any real run id.
    const runsOf = firestore.collection(own);
    const sample = (
      await runsOf.where('run_kind', '==', 'manual').limit(1).get()
    ).docs[0]?.data();
    assert.ok(sample);
    for (let batch = 0; batch < 6; batch++) {
      const writes = firestore.batch();
      for (let i = 0; i < 500; i++) {
        const n = batch * 500 + i;
        writes.set(runsOf.doc(`0000${String(n).padStart(6, '0')}`), {
          ...sample,
          job_name: `other-${n}`,
        });
      }
      await writes.commit();
    }

    const { code, stdout, stderr } = await runs(
      own,
      '--json',
      '--since',
      '30m',
      '--now',
      `${DAY}T12:30:00Z`,
    );

    assert.equal(code, 0, stderr);
    const rows = JSON.parse(stdout) as { job: string; kind: string }[];
    assert.equal(rows.filter((r) => r.kind === 'manual').length, 2);
    assert.ok(rows.every((r) => r.job === 'history-five'));
  });

  it('lists a forced run from the moment it exists, though it carries the next slot, still to come', async () => {
    const own = collection.replace(/$/, '-forced');
    const fn = serveJobs(
      validateJobs(
        historyJobs.map((job) => defineJob({ ...job, run: () => {} })),
      ),
      { collection: own },
    );
    await fn.request
      .post('/')
      .set(schedulerHeaders('history-five', `${DAY}T12:25:00Z`));
    // "Force run" at 12:30:10 carries the next slot, 12:35, in its record.
    await firestore
      .collection(own)
      .doc('f'.repeat(64))
      .set({
        status: 'completed',
        attempt_id: 'forced-attempt',
        attempts: 1,
        run_kind: 'forced',
        job_name: 'history-five',
        schedule_time: Timestamp.fromDate(new Date(`${DAY}T12:35:00Z`)),
        expire_at: Timestamp.fromDate(new Date('2099-01-01T00:00:00Z')),
      });

    const { code, stdout, stderr } = await runs(
      own,
      '--json',
      '--since',
      '10m',
      '--now',
      `${DAY}T12:30:10Z`,
    );

    assert.equal(code, 0, stderr);
    const rows = JSON.parse(stdout) as {
      slot: string;
      kind: string;
      state: string;
    }[];
    assert.deepEqual(
      rows.filter((r) => r.kind === 'forced').map((r) => [r.slot, r.state]),
      [[`${DAY}T12:35:00Z`, 'completed']],
    );
  });

  it("--check counts a weekly job's one missed slot in a window with no other slot, from its record before the window", async () => {
    const weekly = validateJobs(
      weeklyJobs.map((job) => defineJob({ ...job, run: () => {} })),
    );
    const fn = serveJobs(weekly);
    const ran = await fn.request
      .post('/')
      .set(schedulerHeaders('weekly', `${MONDAY}T09:00:00Z`));
    assert.equal(ran.body.outcome, 'processed');

    const { code, stderr } = await runsOf(
      'test/fixtures/jobs-weekly.ts',
      fn.collection,
      '--since',
      '7d',
      '--now',
      `${dayAfter(MONDAY, 8)}T12:00:00Z`,
      '--check',
    );

    assert.equal(code, 1, stderr);
    assert.match(
      stderr,
      new RegExp(`weekly ${dayAfter(MONDAY, 7)}T09:00:00Z missed`),
    );
  });

  it("lists a manual run in a window that holds none of the job's slots (a weekly job, --since 2h)", async () => {
    const weekly = validateJobs(
      weeklyJobs.map((job) => defineJob({ ...job, run: () => {} })),
    );
    const fn = serveJobs(weekly);
    const wednesday = dayAfter(MONDAY, 2);
    const ran = await fn.request.post('/').set({
      ...schedulerHeaders('weekly', `${wednesday}T12:20:00Z`),
      'X-Run-Once-Mode': 'manual',
      'X-Run-Once-Trigger-Id': 'weekly-manual-dddd',
    });
    assert.equal(ran.body.outcome, 'processed', ran.text);

    const { code, stdout, stderr } = await runsOf(
      'test/fixtures/jobs-weekly.ts',
      fn.collection,
      '--json',
      '--since',
      '2h',
      '--now',
      `${wednesday}T12:30:00Z`,
    );

    assert.equal(code, 0, stderr);
    const rows = JSON.parse(stdout) as { job: string; kind: string }[];
    assert.deepEqual(
      rows.map((r) => [r.job, r.kind]),
      [['weekly', 'manual']],
    );
  });

  it('lists and judges one key scope only: scope production shows none of scope staging’s records', async () => {
    // Five-minute slots two hours ago: relative to the clock, never a fixed date.
    const base = Math.floor((Date.now() - 2 * 3_600_000) / 300_000) * 300_000;
    const slotAt = (minutes: number) =>
      new Date(base + minutes * 60_000).toISOString().replace('.000Z', 'Z');
    const staging = serveJobs(
      validateJobs(
        historyJobs.map((job) => defineJob({ ...job, run: () => {} })),
      ),
      { env: { RUN_KEY_SCOPE: 'staging' } },
    );
    for (const minutes of [0, 10]) {
      await staging.request
        .post('/')
        .set(schedulerHeaders('history-five', slotAt(minutes)));
    }
    await staging.request.post('/').set({
      ...schedulerHeaders('history-five', slotAt(12)),
      'X-Run-Once-Mode': 'manual',
      'X-Run-Once-Trigger-Id': 'staging-manual-1',
    });
    const window = [
      '--job',
      'history-five',
      '--since',
      '30m',
      '--now',
      slotAt(30),
      '--json',
    ];
    type Row = {
      kind: string;
      state: string;
      attempts: number;
      mark: string | null;
    };

    // The scope as the deployed function has it: RUN_KEY_SCOPE from the environment.
    const production = await runsWith(
      { RUN_KEY_SCOPE: 'production' },
      JOBS_MODULE,
      staging.collection,
      ...window,
    );
    const own = await runsWith(
      { RUN_KEY_SCOPE: 'staging' },
      JOBS_MODULE,
      staging.collection,
      ...window,
    );

    assert.equal(production.code, 0, production.stderr);
    const rows = JSON.parse(production.stdout) as Row[];
    assert.deepEqual(
      rows.filter(
        (r) => r.kind !== 'slot' || r.attempts > 0 || r.mark !== null,
      ),
      [],
      'no record of scope staging in scope production',
    );
    const stagingRows = JSON.parse(own.stdout) as Row[];
    assert.equal(stagingRows.filter((r) => r.kind === 'manual').length, 1);
    assert.equal(stagingRows.filter((r) => r.state === 'completed').length, 3);
  });

  it('--check exits 1 on a manual run that failed: it has no retries, so the failure is final', async () => {
    const own = collection.replace(/$/, '-manual-failed');
    const fn = serveJobs(
      validateJobs(
        historyJobs.map((job) =>
          defineJob({
            ...job,
            run: () => {
              throw new Error('downstream refused the manual run');
            },
          }),
        ),
      ),
      { collection: own },
    );
    const answer = await fn.request.post('/').set({
      ...schedulerHeaders('history-five', `${DAY}T12:20:00Z`),
      'X-Run-Once-Mode': 'manual',
      'X-Run-Once-Trigger-Id': 'trigger-failed-cccc',
    });
    assert.equal(answer.status, 500, answer.text);

    const { code, stdout, stderr } = await runs(
      own,
      '--check',
      '--since',
      '30m',
      '--now',
      `${DAY}T12:30:00Z`,
    );

    assert.equal(code, 1, stderr);
    assert.equal(stdout, '');
    assert.match(
      stderr,
      /history-five \S+Z manual run failed \(downstream refused the manual run\): npm run trigger -- history-five\n/,
    );
  });

  it('shows the same slots with and without --job after a schedule change, old-schedule records marked', async () => {
    const own = collection.replace(/$/, '-schedule-change');
    // The job ran every minute before a deploy changed it to every five (the fixture's schedule).
    const before = serveJobs(
      validateJobs(
        historyJobs.map((job) =>
          defineJob({ ...job, schedule: '* * * * *', run: () => {} }),
        ),
      ),
      { collection: own },
    );
    for (const minute of ['12:01', '12:02', '12:03']) {
      await before.request
        .post('/')
        .set(schedulerHeaders('history-five', `${DAY}T${minute}:00Z`));
    }
    const args = ['--since', '10m', '--now', `${DAY}T12:06:00Z`, '--json'];

    const all = await runs(own, ...args);
    const one = await runs(own, '--job', 'history-five', ...args);

    assert.equal(all.code, 0, all.stderr);
    assert.equal(one.code, 0, one.stderr);
    const shape = (stdout: string) =>
      (
        JSON.parse(stdout) as {
          slot: string;
          state: string;
          mark: string | null;
        }[]
      ).map((r) => [r.slot.slice(11, 16), r.state, r.mark ?? '-'].join(' '));
    assert.deepEqual(shape(all.stdout), shape(one.stdout));
    assert.deepEqual(shape(all.stdout).slice(-4), [
      '12:01 completed old schedule',
      '12:02 completed old schedule',
      '12:03 completed old schedule',
      '12:05 missed -',
    ]);
  });
});

/** A local port nothing listens on: one the system gave a server that is closed again. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** An ops command as a process, to its exit status and output; killed after `RUNS_TIMEOUT_MS`. */
function opsProcess(
  env: NodeJS.ProcessEnv,
  args: string[],
): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), RUNS_TIMEOUT_MS);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

describe('npm run runs --check: a job whose check cursor the function cannot read', () => {
  it('fails, naming the job, the cursor and what in it is wrong: the function reports no missed run of it meanwhile (an attack, stop 71)', async () => {
    const fn = serveJobs(validateJobs(historyJobs));
    for (const time of ['12:20', '12:25']) {
      await fn.request
        .post('/')
        .set(schedulerHeaders('history-five', `${DAY}T${time}:00Z`));
    }
    const check = () =>
      runs(
        fn.collection,
        '--check',
        '--since',
        '10m',
        '--now',
        `${DAY}T12:27:00Z`,
      );
    const before = await check();
    // Another version (or a hand) wrote a rule that starts a month from now.
    const monthAhead = Timestamp.fromMillis(Date.now() + 30 * DAY_MS);
    const document = firestore
      .collection(jobStateCollection(fn.collection))
      .doc(checkDocumentId('history-five', []));
    await document.set({
      checked_before: Timestamp.fromMillis(Date.now() - 2 * DAY_MS),
      run_seen: true,
      rules: [
        { schedule: '*/5 * * * *', time_zone: 'Etc/UTC', since: monthAhead },
      ],
    });
    const { code, stdout, stderr } = await check();

    assert.equal(before.code, 0, before.stderr);
    assert.equal(code, 1);
    assert.equal(stdout, '');
    assert.match(
      stderr,
      /^runs: history-five: its check cursor history-five~check is unreadable \(rules\[0\] has a time ahead of Firestore's now\): the function reports no missed run of it until the cursor is repaired/m,
    );
    assert.match(
      stderr,
      /^runs --check: history-five: the function's missed-run check is off: repair or delete its cursor history-five~check /m,
    );
    assert.doesNotMatch(stderr, /no problem/);
    // A backfill judges by the declared rule; the job's check is still off: exit 1 (stop 72).
    const backfill = await runs(
      fn.collection,
      '--backfill',
      '--dry-run',
      '--since',
      '10m',
      '--now',
      `${DAY}T12:27:00Z`,
    );
    const json = await runs(
      fn.collection,
      '--json',
      '--since',
      '10m',
      '--now',
      `${DAY}T12:27:00Z`,
    );
    assert.equal(json.code, 0, json.stderr);
    assert.deepEqual(
      [
        ...new Set(
          (JSON.parse(json.stdout) as { checkOff: string | null }[]).map(
            (row) => row.checkOff,
          ),
        ),
      ],
      ["rules[0] has a time ahead of Firestore's now"],
      'each row of the job says why its check is off',
    );
    assert.equal(backfill.code, 1, backfill.stderr);
    assert.match(
      backfill.stderr,
      /^runs --backfill: history-five: the function's missed-run check is off: repair or delete its cursor history-five~check /m,
    );
  });
});

describe('the operations commands with Firestore unreachable', () => {
  it('print their clear error alone, no crash dump of the terminated client, and exit 1', async () => {
    const port = await closedPort();
    const env = {
      ...process.env,
      FIRESTORE_EMULATOR_HOST: `127.0.0.1:${port}`,
      FIRESTORE_TIMEOUT_SECONDS: '1',
      JOBS_MODULE,
      GOOGLE_CLOUD_PROJECT: 'demo-unreachable',
    };
    const commands = [
      ['src/ops/runs.ts', '--since', '1h'],
      ['src/ops/runs.ts', '--since', '1h', '--check'],
      ['src/ops/runs.ts', '--since', '1h', '--backfill', '--dry-run'],
      ['src/ops/pause.ts', 'pause', 'history-five'],
      ['src/ops/pause.ts', 'resume', 'history-five'],
    ];

    const results = await Promise.all(
      commands.map((args) => opsProcess(env, args)),
    );

    for (const [i, { code, stderr }] of results.entries()) {
      const command = (commands[i] ?? []).join(' ');
      assert.match(
        stderr,
        /Firestore did not answer the .* within 1000 ms/,
        `${command}: ${stderr}`,
      );
      assert.doesNotMatch(
        stderr,
        /already been terminated|\n\s+at |Node\.js v/,
        `${command}: ${stderr}`,
      );
      assert.equal(code, 1, `${command}: ${stderr}`);
    }
  });
});

describe('the operations commands without Google credentials', () => {
  it('say so, and what to set, without a stack, and exit 1', async (t) => {
    // No emulator host and nowhere to find Application Default Credentials: an empty home and
    // gcloud configuration, no key file, no metadata server.
    const {
      FIRESTORE_EMULATOR_HOST: _host,
      GOOGLE_APPLICATION_CREDENTIALS: _key,
      ...rest
    } = process.env;
    const home = scratchDir(t, 'no-credentials-');
    const env = {
      ...rest,
      HOME: home,
      CLOUDSDK_CONFIG: home,
      METADATA_SERVER_DETECTION: 'none',
      FIRESTORE_TIMEOUT_SECONDS: '5',
      JOBS_MODULE,
      GOOGLE_CLOUD_PROJECT: 'demo-no-credentials',
    };
    const commands = [
      ['src/ops/runs.ts', '--since', '1h'],
      ['src/ops/runs.ts', '--since', '1h', '--check'],
      ['src/ops/pause.ts', 'pause', 'history-five', '--record-only'],
    ];

    const results = await Promise.all(
      commands.map((args) => opsProcess(env, args)),
    );

    for (const [i, { code, stderr }] of results.entries()) {
      const command = (commands[i] ?? []).join(' ');
      assert.match(
        stderr,
        /: no Google credentials found .* set FIRESTORE_EMULATOR_HOST .*`gcloud auth application-default login`/,
        `${command}: ${stderr}`,
      );
      assert.doesNotMatch(
        stderr,
        /\n\s+at |Node\.js v/,
        `${command}: ${stderr}`,
      );
      assert.equal(code, 1, `${command}: ${stderr}`);
    }
  });
  it('name a key file in GOOGLE_APPLICATION_CREDENTIALS they cannot use, without a stack, and exit 1', async (t) => {
    const { FIRESTORE_EMULATOR_HOST: _host, ...rest } = process.env;
    const home = scratchDir(t, 'bad-key-file-');
    const keyFiles = {
      'not JSON': writeKeyFile(home, 'not-json.json', '{bad'),
      'no client_email': writeKeyFile(
        home,
        'no-email.json',
        '{"type":"service_account"}',
      ),
      missing: join(home, 'missing.json'),
    };

    const results = await Promise.all(
      Object.values(keyFiles).map((keyFile) =>
        opsProcess(
          {
            ...rest,
            HOME: home,
            CLOUDSDK_CONFIG: home,
            GOOGLE_APPLICATION_CREDENTIALS: keyFile,
            METADATA_SERVER_DETECTION: 'none',
            FIRESTORE_TIMEOUT_SECONDS: '5',
            JOBS_MODULE,
            GOOGLE_CLOUD_PROJECT: 'demo-bad-key-file',
          },
          ['src/ops/runs.ts', '--since', '1h'],
        ),
      ),
    );

    for (const [i, { code, stderr }] of results.entries()) {
      const what = Object.keys(keyFiles)[i];
      assert.match(
        stderr,
        /^runs: GOOGLE_APPLICATION_CREDENTIALS names a key file google-auth-library cannot use: fix the file or unset the variable/,
        `${what}: ${stderr}`,
      );
      assert.doesNotMatch(
        stderr,
        /\n\s+at |Node\.js v|throw reason/,
        `${what}: ${stderr}`,
      );
      assert.equal(code, 1, `${what}: ${stderr}`);
    }
  });
});

/** A new directory in the system's temporary directory, removed when test `t` ends. */
function scratchDir(t: TestContext, prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Writes `content` to `name` in `directory`, for a key file; returns its path. */
function writeKeyFile(
  directory: string,
  name: string,
  content: string,
): string {
  const path = join(directory, name);
  writeFileSync(path, content);
  return path;
}

/** The starter's jobs as shipped: `scheduled-job` every 5 minutes with Scheduler's default retries. */
const STARTER_JOBS_MODULE = join(ROOT, 'test/fixtures/starter/src/jobs.ts');

/** `scheduled-job` as the starter declares it, with a `run` that does nothing, to serve. */
const starterJob = validateJobs([
  defineJob({
    id: 'scheduled-job',
    schedule: '*/5 * * * *',
    timeZone: 'Etc/UTC',
    run: () => {},
  }),
]);

/** The slots a table line folds as before the first record: `[range, "…: N slots"]`, by line. */
function foldedLines(table: string): string[] {
  return table
    .trimEnd()
    .split('\n')
    .slice(1)
    .map((line) => line.split(/ {2,}/)[2] ?? '');
}

/** The `HH:MM` of each slot a `--backfill` summary lists to deliver. */
function plannedSlots(stderr: string): string[] {
  return [
    ...stderr.matchAll(/^ {2}\S+ \d{4}-\d\d-\d\dT(\d\d:\d\d):00Z$/gm),
  ].map((match) => match[1] as string);
}

describe('npm run runs: the view tells one story about missed slots (issue 42)', () => {
  it('shows every slot of a job with no record one way, with one count and why, in the table, the JSON and --check', async () => {
    // An empty ledger: 37 slots of a five-minute job, 12 of them inside its hour-long retry
    // window; the missed-run check judges none of them (no record of the job yet).
    const collection = `empty_${Date.now()}`;
    const window = ['--job', 'scheduled-job', '--since', '3h'];
    const now = ['--now', `${DAY}T12:00:00Z`];

    const table = await runsOf(
      STARTER_JOBS_MODULE,
      collection,
      ...window,
      ...now,
    );
    const json = await runsOf(
      STARTER_JOBS_MODULE,
      collection,
      ...window,
      ...now,
      '--json',
    );
    const check = await runsOf(
      STARTER_JOBS_MODULE,
      collection,
      ...window,
      ...now,
      '--check',
    );

    assert.equal(table.code, 0, table.stderr);
    assert.deepEqual(foldedLines(table.stdout), [
      'not judged (before first record): 37 slots',
    ]);
    assert.match(
      table.stderr,
      /^runs: 37 slot\(s\) not judged \(before first record\): the missed-run check never judges a slot before its job's first record/m,
    );
    const states = (JSON.parse(json.stdout) as { state: string }[]).map(
      (row) => row.state,
    );
    assert.equal(states.length, 37);
    assert.deepEqual(new Set(states), new Set(['no_run']));
    assert.equal(check.code, 0, check.stderr);
    assert.match(
      check.stderr,
      /no problem in 37 slots and runs of 1 job \(37 not judged \(before first record\)\)$/m,
    );
  });

  it('--backfill --dry-run leaves alone as many slots before the first record as the table shows, and says which it would deliver', async () => {
    const fn = serveJobs(starterJob);
    await fn.request
      .post('/')
      .set(schedulerHeaders('scheduled-job', `${DAY}T12:00:00Z`))
      .expect(200);
    const window = [
      '--job',
      'scheduled-job',
      '--since',
      '3h',
      '--now',
      `${DAY}T12:30:00Z`,
    ];
    // 09:30 to 11:55 (30 slots) come before the record of 12:00; closed 66 minutes after their time
    // (the last retry sent at 60, its deadline, one deadline more: as the missed-run check), 09:30
    // to 11:20 are missed at 12:30, 11:25 to 11:55 still inside it.
    const pastWindow = 23;

    const res = await runsOf(
      STARTER_JOBS_MODULE,
      fn.collection,
      ...window,
      '--backfill',
      '--dry-run',
    );

    assert.equal(res.code, 0, res.stderr);
    assert.equal(
      foldedLines(res.stdout)[0],
      'not judged (before first record): 30 slots',
    );
    assert.match(
      res.stderr,
      new RegExp(
        `^runs --backfill: 30 slot\\(s\\) left alone: not judged \\(before first record\\), as the table shows them .*--include-before-first-record delivers the ${pastWindow} of them past their retry window .*the other ${30 - pastWindow} are still inside their retry window`,
        'm',
      ),
    );
    const included = await runsOf(
      STARTER_JOBS_MODULE,
      fn.collection,
      ...window,
      '--backfill',
      '--dry-run',
      '--include-before-first-record',
    );
    assert.equal(included.code, 0, included.stderr);
    assert.equal(plannedSlots(included.stderr).length, pastWindow);
    assert.match(
      included.stderr,
      new RegExp(
        `^runs --backfill: ${30 - pastWindow} slot\\(s\\) left alone: not judged \\(before first record\\), as the table shows them; all ${30 - pastWindow} still inside their retry window`,
        'm',
      ),
    );
  });

  it('--check suggests a backfill from the oldest missed slot’s time, which run two minutes later still covers every missed slot', async () => {
    const fn = serveJobs(
      validateJobs(
        historyJobs.map((job) => defineJob({ ...job, run: () => {} })),
      ),
    );
    // 12:05 and 12:10 never delivered; 12:20 delivered before the later runs.
    for (const time of ['12:00', '12:15', '12:20']) {
      await fn.request
        .post('/')
        .set(schedulerHeaders('history-five', `${DAY}T${time}:00Z`))
        .expect(200);
    }
    const check = await runs(
      fn.collection,
      '--check',
      '--since',
      '30m',
      '--now',
      `${DAY}T12:20:00Z`,
    );
    const suggested = /npm run runs -- (.*)$/m.exec(check.stderr)?.[1];

    assert.equal(check.code, 1, check.stderr);
    assert.equal(
      suggested,
      `--job history-five --since ${DAY}T12:05:00Z --backfill`,
    );
    const later = await runs(
      fn.collection,
      ...(suggested ?? '').split(' '),
      '--dry-run',
      '--now',
      `${DAY}T12:22:00Z`,
    );
    assert.equal(later.code, 0, later.stderr);
    assert.deepEqual(plannedSlots(later.stderr), ['12:05', '12:10']);
    assert.doesNotMatch(later.stderr, /--since .* takes them in/);
  });

  it('says when a --since given by the user cuts off a missed slot, naming the --since that takes it in', async () => {
    const fn = serveJobs(
      validateJobs(
        historyJobs.map((job) => defineJob({ ...job, run: () => {} })),
      ),
    );
    for (const time of ['12:00', '12:15', '12:20']) {
      await fn.request
        .post('/')
        .set(schedulerHeaders('history-five', `${DAY}T${time}:00Z`))
        .expect(200);
    }
    const now = ['--now', `${DAY}T12:22:00Z`];

    // From 12:06: 12:05, missed like 12:10 after it, is left out.
    const cut = await runs(
      fn.collection,
      '--since',
      '16m',
      ...now,
      '--backfill',
      '--dry-run',
    );
    // From 12:14: the slot before, 12:10, is missed too, and so is 12:05 before it.
    const cutTwo = await runs(
      fn.collection,
      '--since',
      `${DAY}T12:14:00Z`,
      ...now,
      '--check',
    );
    // From 12:16: the slot before, 12:15, ran.
    const clean = await runs(fn.collection, '--since', '6m', ...now, '--check');

    assert.equal(cut.code, 0, cut.stderr);
    assert.deepEqual(plannedSlots(cut.stderr), ['12:10']);
    assert.match(
      cut.stderr,
      new RegExp(
        `history-five: --since 16m starts the window at ${DAY}T12:06:00Z, after 1 missed slot\\(s\\) of the job, the oldest ${DAY}T12:05:00Z: .* --since ${DAY}T12:05:00Z takes them in`,
      ),
    );
    assert.equal(cutTwo.code, 0, cutTwo.stderr);
    assert.match(
      cutTwo.stderr,
      new RegExp(
        `after 2 missed slot\\(s\\) of the job, the oldest ${DAY}T12:05:00Z`,
      ),
    );
    assert.equal(clean.code, 0, clean.stderr);
    assert.doesNotMatch(clean.stderr, /missed slot\(s\) of the job/);
  });
});
