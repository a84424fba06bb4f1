/**
 * `npm run demo`: serves the function on a local port (two jobs of its own, `nightly-report` and
 * `demo-flaky`, both running `scripts/demo-job.ts`, a copy of the example job, never the user's
 * jobs; the real ledger on the
 * Firestore emulator) and sends it the deliveries Cloud Scheduler sends in real life, then prints
 * which jobs it runs and what each delivery got. Job `demo-flaky` is wrapped to fail its first
 * execution, to show a retry.
 */

import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Firestore } from '@google-cloud/firestore';
import * as functions from '@google-cloud/functions-framework';
import { getTestServer } from '@google-cloud/functions-framework/testing';
import type { JobContext } from '../core/job-context.ts';
import { RunLedger } from '../core/ledger.ts';
import { RunDocuments } from '../core/run-documents.ts';
import { loadConfig } from '../function/config.ts';
import { createScheduledJobHandler } from '../function/handler.ts';
import { createLogger } from '../function/logger.ts';
import { defineJob, validateJobs } from '../policy/job-declaration.ts';
import { jobStateCollection } from '../policy/job-state.ts';
import { RunHistory } from '../policy/run-history.ts';
import { demoJob } from './demo-job.ts';

const config = loadConfig({
  ...process.env,
  RUNS_COLLECTION: `demo_runs_${Date.now()}`,
  LOG_LEVEL: 'silent',
});
const firestore = new Firestore({
  projectId: config.projectId ?? 'demo-scheduler-run-once',
});
const ledger = RunLedger.open(firestore, {
  collection: config.runsCollection,
  leaseMs: config.leaseMs,
  retentionMs: config.retentionMs,
  timeoutMs: config.firestoreTimeoutMs,
});
const executions = new Map<string, number>();
const firstJobStarted = Promise.withResolvers<void>();
async function job(ctx: JobContext): Promise<void> {
  const n = (executions.get(ctx.jobName) ?? 0) + 1;
  executions.set(ctx.jobName, n);
  firstJobStarted.resolve();
  if (ctx.jobName === 'demo-flaky' && n === 1) {
    throw new Error('downstream API returned 503');
  }
  await demoJob(ctx);
}
// The demo's own two jobs, both running the demo's copy of the example job (demo-flaky fails once).
const jobs = validateJobs(
  ['nightly-report', 'demo-flaky'].map((id) =>
    defineJob({ id, schedule: '*/5 * * * *', run: job }),
  ),
);
// Firestore's time, driven by the demo: its story is set on 16 October 2026 (the function judges
// forced runs, and refuses slots older than RETENTION_SECONDS, by this clock).
let demoNow = new Date('2026-10-16T12:05:30Z');
functions.http(
  'demo',
  createScheduledJobHandler({
    config,
    ledger,
    history: new RunHistory(ledger.documents),
    jobDocuments: new RunDocuments(firestore, {
      collection: jobStateCollection(config.runsCollection),
      retentionMs: config.retentionMs,
      timeoutMs: config.firestoreTimeoutMs,
    }),
    jobs,
    logger: createLogger(config),
    clock: async () => demoNow,
  }),
);
const server = getTestServer('demo');
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const { port } = server.address() as AddressInfo;

/** Sends one delivery over HTTP/1.1, header names exactly as given. */
function deliver(
  headers: Record<string, string>,
): Promise<{ status: number; outcome: string; message: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, method: 'POST', path: '/', headers },
      (res) => {
        let body = '';
        res.on('data', (c: Buffer) => {
          body += c.toString();
        });
        res.on('end', () => {
          const parsed = JSON.parse(body) as {
            outcome: string;
            message: string;
          };
          resolve({ status: res.statusCode ?? 0, ...parsed });
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

const cron = (job: string, time = '2026-10-16T12:00:00Z') => ({
  'X-CloudScheduler-JobName': job,
  'X-CloudScheduler-ScheduleTime': time,
});
const rows: string[][] = [];
async function step(
  what: string,
  delivery: Promise<Awaited<ReturnType<typeof deliver>>>,
  job: string,
) {
  const res = await delivery;
  rows.push([
    String(rows.length + 1),
    what,
    String(res.status),
    res.outcome,
    String(executions.get(job) ?? 0),
    res.message,
  ]);
}

const first = deliver(cron('nightly-report'));
// The retry arrives while the job runs, as after a missed attempt deadline.
await firstJobStarted.promise;
await step(
  'retry while the job runs (attempt deadline hit)',
  deliver(cron('nightly-report')),
  'nightly-report',
);
await step('first delivery of nightly-report 12:00Z', first, 'nightly-report');
await step(
  'retry after completion (lost response)',
  deliver(cron('nightly-report')),
  'nightly-report',
);
await step(
  'HTTP/2-style retry: lowercase names, -07:00 offset',
  deliver({
    'x-cloudscheduler-jobname': 'nightly-report',
    'x-cloudscheduler-scheduletime': '2026-10-16T05:00:00-07:00',
  }),
  'nightly-report',
);
await step(
  'next scheduled run, 12:05Z',
  deliver(cron('nightly-report', '2026-10-16T12:05:00Z')),
  'nightly-report',
);
// "Force run" at 12:56 sends the next schedule time, 13:00Z: a forced run, not the 13:00 slot.
demoNow = new Date('2026-10-16T12:56:00Z');
await step(
  'Force run at 12:56 (it carries the next slot, 13:00Z)',
  deliver(cron('nightly-report', '2026-10-16T13:00:00Z')),
  'nightly-report',
);
await step(
  'retry of that forced run',
  deliver(cron('nightly-report', '2026-10-16T13:00:00Z')),
  'nightly-report',
);
demoNow = new Date('2026-10-16T13:00:01Z');
await step(
  'the scheduled delivery at 13:00Z still runs',
  deliver(cron('nightly-report', '2026-10-16T13:00:00Z')),
  'nightly-report',
);
await step(
  'demo-flaky: the job throws',
  deliver(cron('demo-flaky')),
  'demo-flaky',
);
await step(
  'demo-flaky: Scheduler retries',
  deliver(cron('demo-flaky')),
  'demo-flaky',
);
await step(
  'an "every 5 minutes" job (no ScheduleTime)',
  deliver({ 'X-CloudScheduler-JobName': 'groc-job' }),
  'groc-job',
);

console.log(
  `Jobs ${jobs.map((j) => j.id).join(' and ')}, declared by scripts/demo.ts (not src/jobs.ts), ` +
    'both run scripts/demo-job.ts, a copy of the example job (never your jobs); demo-flaky fails its first execution. ' +
    `Function on 127.0.0.1:${port}; run records in the emulator, collection ${config.runsCollection}.\n`,
);
const header = ['#', 'delivery', 'status', 'outcome', 'job runs', 'message'];
const table = [header, ...rows];
const widths = header.map((_, i) =>
  Math.max(
    ...table.map((r) => Math.min((r[i] ?? '').length, i === 5 ? 70 : 60)),
  ),
);
for (const row of table) {
  console.log(
    row
      .map((cell, i) =>
        cell.length > (widths[i] ?? 0)
          ? `${cell.slice(0, (widths[i] ?? 1) - 1)}…`
          : cell.padEnd(widths[i] ?? 0),
      )
      .join(' | '),
  );
}
server.close();
process.exit(0);
