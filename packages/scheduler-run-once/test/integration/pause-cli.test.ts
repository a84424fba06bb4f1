/**
 * `npm run pause` / `npm run resume` (`src/ops/pause.ts`) against the emulator, with `npm run runs`
 * reading what they recorded: the slots of a pause show as `paused` with its note (table, JSON,
 * page), `--check` passes on them and fails once the pause outlives its `--until`; the bounds of
 * `--until` and `--note` are refused with what to give. The commands run in this process
 * (`test/fixtures/in-process-command.ts`), but in the case named "as processes", as `npm run pause`
 * users run them. Against the emulator the Scheduler half is `npm run dev`'s (its local Scheduler
 * reads the record); the gcloud command a deployed pause runs is checked by the real parser in
 * deploy-gcloud-parser.test.ts.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Timestamp } from '@google-cloud/firestore';
import { ROOT } from '../../src/dev/local-processes.ts';
import * as pauseCommand from '../../src/ops/pause.ts';
import * as runsCommand from '../../src/ops/runs.ts';
import { jobStateCollection } from '../../src/policy/job-state.ts';
import { checkDocumentId } from '../../src/policy/missed-run-cursor.ts';
import {
  type Command,
  type CommandResult,
  runInProcess,
} from '../fixtures/in-process-command.ts';
import { firestore, freshCollection } from '../helpers.ts';

/** Absolute: the commands in this process resolve it from its current directory. */
const JOBS_MODULE = join(ROOT, 'test/fixtures/jobs-one.ts');
const JOB = 'scheduled-job';
/** How long one command may take: a loaded machine makes a slow command, not a hang. */
const TIMEOUT_MS = 90_000;

/** The commands by their script, as the process case names them. */
const COMMANDS: Record<string, Command> = {
  'src/ops/pause.ts': {
    name: 'pause',
    usage: pauseCommand.USAGE,
    main: pauseCommand.main,
  },
  'src/ops/runs.ts': {
    name: 'runs',
    usage: runsCommand.USAGE,
    main: runsCommand.main,
  },
};

/** Runs an ops command in this process. */
function run(script: string, collection: string, ...args: string[]) {
  const ops = COMMANDS[script];
  if (ops === undefined) {
    throw new Error(`no command ${script}`);
  }
  return runInProcess(
    ops,
    [...args, '--collection', collection],
    { ...process.env, JOBS_MODULE },
    TIMEOUT_MS,
  );
}
/** {@link run} as a process, as `npm run` runs it. */
function runProcess(script: string, collection: string, ...args: string[]) {
  const result = spawnSync(
    process.execPath,
    [script, ...args, '--collection', collection],
    {
      cwd: ROOT,
      env: { ...process.env, JOBS_MODULE },
      encoding: 'utf8',
      timeout: TIMEOUT_MS,
    },
  );
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}
const pause = (collection: string, ...args: string[]) =>
  run('src/ops/pause.ts', collection, 'pause', ...args);
const resume = (collection: string, ...args: string[]) =>
  run('src/ops/pause.ts', collection, 'resume', ...args);
const runs = (collection: string, ...args: string[]) =>
  run('src/ops/runs.ts', collection, ...args);
/** `--now` this many minutes from now: the slots after the pause began are in the past then. */
const inMinutes = (minutes: number) =>
  new Date(Date.now() + minutes * 60_000).toISOString();

describe('npm run pause and resume', () => {
  it('shows the slots of a pause as paused with its note, and --check passes on them', async () => {
    const collection = freshCollection();

    const paused = await pause(
      collection,
      JOB,
      '--until',
      '2h',
      '--note',
      'db maintenance',
    );
    const table = await runs(
      collection,
      '--since',
      '1h',
      '--now',
      inMinutes(30),
    );
    const json = await runs(
      collection,
      '--since',
      '1h',
      '--now',
      inMinutes(30),
      '--json',
    );
    const page = await runs(
      collection,
      '--since',
      '1h',
      '--now',
      inMinutes(30),
      '--html',
      '-',
    );
    const check = await runs(
      collection,
      '--since',
      '1h',
      '--now',
      inMinutes(30),
      '--check',
    );

    assert.equal(paused.code, 0, paused.stderr);
    assert.match(
      paused.stdout,
      /scheduled-job paused since \S+Z \(db maintenance\)/,
    );
    assert.match(table.stdout, /paused \(db maintenance\)/);
    const rows = JSON.parse(json.stdout) as {
      state: string;
      pauseNote: string | null;
    }[];
    const pausedRows = rows.filter((r) => r.state === 'paused');
    assert.ok(pausedRows.length >= 5, json.stdout);
    assert.ok(pausedRows.every((r) => r.pauseNote === 'db maintenance'));
    assert.match(page.stdout, /data-state="paused"/);
    assert.equal(check.code, 0, check.stderr);
    assert.equal(check.stdout, '', '--check prints only the problems');
    assert.match(
      check.stderr,
      // The slots before the pause have no record: before the job's first, not judged.
      /no problem in \d+ slots and runs of 1 job \(\d+ paused; \d+ not judged \(before first record\)\)/,
    );
  });

  it('as processes, fails --check once the pause outlives its --until, naming the command that ends it', () => {
    const collection = freshCollection();
    assert.equal(
      runProcess('src/ops/pause.ts', collection, 'pause', JOB, '--until', '30m')
        .code,
      0,
    );

    const check = runProcess(
      'src/ops/runs.ts',
      collection,
      '--since',
      '1h',
      '--now',
      inMinutes(45),
      '--check',
    );

    assert.equal(check.code, 1, check.stderr);
    assert.match(
      check.stderr,
      /runs --check: scheduled-job paused since \S+Z, past its bound \S+Z: npm run resume -- scheduled-job/,
    );
  });

  it('refuses a second pause and a resume of a job not paused; a resume ends the pause', async () => {
    const collection = freshCollection();
    assert.equal((await pause(collection, JOB)).code, 0);

    const again = await pause(collection, JOB, '--note', 'second');
    const resumed = await resume(collection, JOB);
    const twice = await resume(collection, JOB);
    const later = await runs(
      collection,
      '--since',
      '1h',
      '--now',
      inMinutes(30),
      '--json',
    );

    assert.equal(again.code, 1);
    assert.match(
      again.stderr,
      /scheduled-job is paused already, since .*: npm run resume -- scheduled-job first/,
    );
    assert.equal(resumed.code, 0, resumed.stderr);
    assert.match(resumed.stdout, /scheduled-job resumed at \S+Z/);
    assert.equal(twice.code, 1);
    assert.match(twice.stderr, /scheduled-job is not paused/);
    const rows = JSON.parse(later.stdout) as { state: string }[];
    assert.equal(
      rows.filter((r) => r.state === 'paused').length,
      0,
      'slots after the resume are not paused',
    );
  });

  it('accepts --until 1m and 60s, the minimum, as a minute after the start it records', async () => {
    const collection = freshCollection();
    const results: CommandResult[] = [];

    for (const until of ['1m', '60s']) {
      results.push(await pause(collection, JOB, '--until', until));
      await resume(collection, JOB);
    }

    assert.deepEqual(
      results.map((r) => r.code),
      [0, 0],
      results.map((r) => r.stderr).join('\n'),
    );
    for (const paused of results) {
      const [, since, bound] =
        /paused since (\S+Z).*reported if still paused at (\S+Z)/.exec(
          paused.stdout,
        ) ?? [];
      assert.equal(
        Date.parse(bound ?? '') - Date.parse(since ?? ''),
        60_000,
        paused.stdout,
      );
    }
  });

  it('refuses an --until in the past, past 30 days or no time, a note too long or on two lines, and an undeclared job, with exit 2 and what to give, recording nothing', async () => {
    const collection = freshCollection();
    const cases = [
      {
        name: 'an --until in the past',
        args: ['--until', '2020-01-01T00:00:00Z'],
        says: /not after now/,
      },
      {
        name: 'an --until under a minute',
        args: ['--until', '59s'],
        says: /less than a minute/,
      },
      {
        name: 'an --until past 30 days',
        args: ['--until', '31d'],
        says: /more than 30 days/,
      },
      {
        name: 'an --until that is no time',
        args: ['--until', 'tomorrow'],
        says: /neither an RFC 3339 time/,
      },
      {
        name: 'a note too long',
        args: ['--note', 'x'.repeat(501)],
        says: /at most 500/,
      },
      {
        name: 'a note on two lines',
        args: ['--note', 'a\nb'],
        says: /control character/,
      },
      {
        name: 'an undeclared job',
        args: [],
        says: /no declared job nope/,
        job: 'nope',
      },
    ];

    const refused: CommandResult[] = [];
    for (const { args, job = JOB } of cases) {
      refused.push(await pause(collection, job, ...args));
    }
    const after = await resume(collection, JOB);

    assert.deepEqual(
      refused.map((r, i) => [
        r.code,
        (cases[i] as { says: RegExp }).says.test(r.stderr),
      ]),
      cases.map(() => [2, true]),
      refused.map((r) => r.stderr).join('\n'),
    );
    assert.match(after.stderr, /is not paused/);
  });

  it('resume --catch-up delivers the newest paused slot marked caught up; a plain resume delivers nothing', async () => {
    const heard: IncomingMessage['headers'][] = [];
    const server = createServer((req, res) => {
      heard.push(req.headers);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ outcome: 'processed', message: 'ran' }));
    });
    await new Promise<void>((resolve) =>
      server.listen(0, '127.0.0.1', resolve),
    );
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    const pausedFor = async (collection: string) => {
      // As `npm run pause` wrote it 17 minutes ago: three */5 slots fell in it.
      const pausedAt = Timestamp.fromMillis(Date.now() - 17 * 60_000);
      await firestore
        .collection(jobStateCollection(collection))
        .doc(checkDocumentId(JOB, []))
        .set({ job_name: JOB, pauses: [{ paused_at: pausedAt, note: '' }] });
    };
    try {
      const plain = freshCollection();
      await pausedFor(plain);
      const resumed = await resume(plain, JOB);
      assert.equal(resumed.code, 0, resumed.stderr);
      assert.deepEqual(heard, [], 'a plain resume runs nothing');

      const caughtUp = freshCollection();
      await pausedFor(caughtUp);
      const result = await resume(caughtUp, JOB, '--catch-up', '--url', url);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(heard.length, 1, 'the newest paused slot only');
      const [headers] = heard;
      assert.equal(headers?.['x-run-once-catch-up'], 'true');
      assert.equal(headers?.['x-cloudscheduler-jobname'], JOB);
      const slot = Date.parse(
        String(headers?.['x-cloudscheduler-scheduletime']),
      );
      assert.ok(slot % (5 * 60_000) === 0 && slot <= Date.now());
      assert.ok(
        slot > Date.now() - 5 * 60_000,
        'the newest */5 slot of the pause',
      );
      assert.match(
        result.stdout,
        /1 paused slot\(s\) of scheduled-job to deliver/,
      );
    } finally {
      server.close();
    }
  });

  it('refuses --catch-up with pause, and --url without --catch-up', async () => {
    const collection = freshCollection();
    const withPause = await pause(collection, JOB, '--catch-up');
    const urlAlone = await resume(
      collection,
      JOB,
      '--url',
      'http://127.0.0.1:1/',
    );
    assert.equal(withPause.code, 2);
    assert.match(
      withPause.stderr,
      /--catch-up, --url, --invoker and --token go with resume/,
    );
    assert.equal(urlAlone.code, 2);
    assert.match(
      urlAlone.stderr,
      /--url, --invoker and --token go with --catch-up/,
    );
  });
});
