/**
 * `npm run jobs` (ops/jobs.ts): what it prints, as pure functions, and the command itself run once
 * as Node runs it, from the TypeScript sources (no build, no Firestore).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import {
  deployLines,
  jobsJson,
  jobsTable,
  parseDeployLines,
  upcoming,
} from '../../src/ops/format-jobs.ts';
import { toZonedRfc3339 } from '../../src/ops/slots.ts';
import { validateJobs } from '../../src/policy/job-declaration.ts';
import { nextSlots, toUtcRfc3339 } from '../../src/policy/schedule.ts';
import { jobs as catchUpJobs } from '../fixtures/jobs-catch-up.ts';
import { jobs as twoJobs } from '../fixtures/jobs-two.ts';
import { jobs as starterJobs } from '../fixtures/starter/src/jobs.ts';
import { writeStarterProject } from '../fixtures/starter-project.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
// A fixed date on purpose: every listing is computed from `--after` (hand-worked times, a
// New Year's weekend); nothing compares it with the real clock or Firestore's.
const AFTER = new Date('2026-10-24T12:00:00Z');

/** A project like the starter, which the command serves (it runs in the project's root). */
const PROJECT = writeStarterProject(
  mkdtempSync(path.join(tmpdir(), 'jobs-cli-')),
);
after(() => rmSync(PROJECT, { recursive: true, force: true }));

/** Runs `node ops/jobs.ts ...args` in the starter-like project with `env` added. */
function jobsCommand(args: string[], env: Record<string, string> = {}) {
  return spawnSync(
    process.execPath,
    [path.join(ROOT, 'src/ops/jobs.ts'), ...args],
    {
      cwd: PROJECT,
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '', ...env },
    },
  );
}

describe('src/ops/format-jobs.ts', () => {
  const jobs = validateJobs(twoJobs);

  it('lists each job with its next fire times in UTC and in its zone', () => {
    const table = jobsTable(upcoming(jobs, AFTER, 2));

    assert.equal(
      table,
      [
        'JOB               SCHEDULE               TIME ZONE         NEXT (UTC)            NEXT (LOCAL)',
        'every-five        */5 * * * *            Etc/UTC           2026-10-24T12:05:00Z  2026-10-24T12:05:00+00:00',
        '                                                           2026-10-24T12:10:00Z  2026-10-24T12:10:00+00:00',
        'nightly_report-1  0 9 * JAN-MAR MON-FRI  America/New_York  2027-01-01T14:00:00Z  2027-01-01T09:00:00-05:00',
        '                                                           2027-01-04T14:00:00Z  2027-01-04T09:00:00-05:00',
      ].join('\n'),
    );
  });

  it('prints JSON with id, schedule, timeZone and next times in RFC 3339 UTC and in the zone', () => {
    const json = JSON.parse(jobsJson(upcoming(jobs, AFTER))) as unknown;

    assert.deepEqual(json, [
      {
        id: 'every-five',
        schedule: '*/5 * * * *',
        timeZone: 'Etc/UTC',
        next: [
          '2026-10-24T12:05:00Z',
          '2026-10-24T12:10:00Z',
          '2026-10-24T12:15:00Z',
        ],
        nextLocal: [
          '2026-10-24T12:05:00+00:00',
          '2026-10-24T12:10:00+00:00',
          '2026-10-24T12:15:00+00:00',
        ],
      },
      {
        id: 'nightly_report-1',
        schedule: '0 9 * JAN-MAR MON-FRI',
        timeZone: 'America/New_York',
        next: [
          '2027-01-01T14:00:00Z',
          '2027-01-04T14:00:00Z',
          '2027-01-05T14:00:00Z',
        ],
        nextLocal: [
          '2027-01-01T09:00:00-05:00',
          '2027-01-04T09:00:00-05:00',
          '2027-01-05T09:00:00-05:00',
        ],
      },
    ]);
  });

  it('gives deploy.sh one tab-separated line per job, every setting resolved', () => {
    assert.equal(
      deployLines(jobs),
      [
        'every-five\t*/5 * * * *\tEtc/UTC\t180\t3\t3600\t30\t600\t5\t3570\t7740\tnone',
        'nightly_report-1\t0 9 * JAN-MAR MON-FRI\tAmerica/New_York\t120\t5\t0\t10\t300\t3\t1030\t2180\tnone',
      ].join('\n'),
    );
  });

  it("ends a job's deploy line with its catchUp.slots, which parseDeployLines reads past", () => {
    const declared = validateJobs(catchUpJobs);

    const lines = deployLines(declared).split('\n');

    assert.deepEqual(
      lines.map((line) => line.split('\t').at(-1)),
      ['all', 'none', 'none'],
    );
    assert.deepEqual(
      parseDeployLines(lines.join('\n')).map((job) => job.id),
      ['every-minute', 'every-five', 'run-audit'],
    );
  });
});

describe('node ops/jobs.ts', () => {
  it('--json prints the declared jobs and the same next times as nextSlots', () => {
    const result = jobsCommand(['--json', `--after=${AFTER.toISOString()}`]);

    assert.equal(result.status, 0, result.stderr);
    const printed = JSON.parse(result.stdout) as { [key: string]: unknown }[];
    const declared = validateJobs(starterJobs);
    assert.deepEqual(
      printed.map((job) => Object.keys(job)),
      declared.map(() => ['id', 'schedule', 'timeZone', 'next', 'nextLocal']),
    );
    assert.deepEqual(
      printed,
      declared.map((job) => ({
        id: job.id,
        schedule: job.schedule,
        timeZone: job.timeZone,
        next: nextSlots(job, AFTER, 3).map(toUtcRfc3339),
        nextLocal: nextSlots(job, AFTER, 3).map((t) =>
          toZonedRfc3339(t, job.timeZone),
        ),
      })),
    );
  });

  it('--count N lists N fire times, and refuses a count outside 1..1000 with exit 2', () => {
    const five = jobsCommand(
      ['--json', '--count', '5', `--after=${AFTER.toISOString()}`],
      {
        JOBS_MODULE: path.join(ROOT, 'test/fixtures/jobs-two.ts'),
      },
    );
    const zero = jobsCommand(['--count', '0']);

    assert.equal(five.status, 0, five.stderr);
    const printed = JSON.parse(five.stdout) as { next: string[] }[];
    assert.deepEqual(
      printed.map((job) => job.next.length),
      [5, 5],
    );
    assert.equal(zero.status, 2);
    assert.match(
      zero.stderr,
      /--count "0" is not a whole number from 1 to 1000/,
    );
  });

  it('prints every problem of bad declarations and exits 1', () => {
    const result = jobsCommand(['--json'], {
      JOBS_MODULE: path.join(ROOT, 'test/fixtures/jobs-invalid.ts'),
    });

    assert.equal(result.status, 1);
    assert.equal(result.stdout, '');
    assert.match(result.stderr, /^Invalid configuration:\n/);
    assert.match(
      result.stderr,
      /job "groc" \(jobs\[0\]\): schedule "every 5 minutes" .*groc/,
    );
    assert.match(result.stderr, /jobs\[1\]\): id "groc" is already declared/);
    assert.match(result.stderr, /timeZone "Mars\/Base" is not a time zone/);
  });
});
