/**
 * Catch-up against Scheduler's own late delivery, in real processes: two functions-framework
 * processes of `test/fixtures/catch-up-function.ts` (two per-minute jobs with `catchUp` and its
 * defaults, the run audit every 5 minutes) on one Firestore emulator, behind a front end of this
 * test's own (as Cloud Run's load balancer routes the function's URL to any instance). Scheduler
 * did not deliver one slot of each job on time; when the run audit delivers it (catch-up), the
 * front end hands that delivery to both processes at once, and Scheduler's own late delivery of
 * the slot arrives at the same moment, at one process for `tick` and at the other for `tock`.
 * Each slot must execute exactly once: counted by the lines the job itself appends to a file as it
 * starts, not by run records.
 *
 * The processes' clocks are real, so the slots are chosen relative to now: the late slot three
 * minutes ago (past its grace, 120 s by default), the one after it delivered by Scheduler so that
 * only the late one is late. The late-run scan judges only slots after its mark: an earlier
 * audit's mark is written as that audit would have left it (judged up to the late slot, a run of
 * the job seen), so the case needs no real minutes of waiting.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  createServer,
  type IncomingMessage,
  request,
  type Server,
  type ServerResponse,
} from 'node:http';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Timestamp } from '@google-cloud/firestore';
import {
  type GroupProcess,
  spawnFunction,
  waitForPort,
  within,
} from '../../src/dev/local-processes.ts';
import { jobStateCollection } from '../../src/policy/job-state.ts';
import { lateDocumentId } from '../../src/policy/late-runs.ts';
import type { CatchUpExecution } from '../fixtures/catch-up-function.ts';
import {
  type Delivery,
  deliver,
  freePort,
  freshCollection,
  removeScratch,
  scheduled,
  scratch,
  sleep,
  waitFor,
} from '../fixtures/harness.ts';
import { rfc3339 } from '../fixtures/times.ts';
import { firestore } from '../helpers.ts';

const MINUTE = 60_000;
const START_TIMEOUT_MS = 60_000;
/** How long ago the late slot is, in minutes: past the default 120 s grace, a minute to spare. */
const LATE_MINUTES_AGO = 3;
/** Every delivery is answered within this, ms: a job works 1.5 s, a catch-up waits for its claim. */
const ANSWER_BOUND_MS = 60_000;
const CATCH_UP_HEADER = 'x-run-once-catch-up';

const children: GroupProcess[] = [];
const servers: Server[] = [];
after(() => {
  for (const child of children) {
    child.signalGroup('SIGKILL');
  }
  for (const server of servers) {
    server.close();
  }
  removeScratch();
});

/** One process of the fixture function on a free port, once it accepts connections. */
async function startProcess(env: Record<string, string>) {
  const port = await freePort();
  const child = spawnFunction({
    target: 'catchUpFunction',
    source: 'test/fixtures/catch-up-function.ts',
    port,
    env,
  });
  children.push(child);
  await waitForPort(port, { timeoutMs: START_TIMEOUT_MS, process: child });
  return { child, port, url: `http://127.0.0.1:${port}/` };
}

type Process = Awaited<ReturnType<typeof startProcess>>;

/** What reached the front end's race: each delivery of a caught-up slot and its answer. */
interface RaceDelivery {
  readonly jobName: string;
  readonly slot: string;
  readonly from: 'catch-up' | 'scheduler';
  readonly to: number;
  readonly status: number;
  readonly outcome: string | undefined;
}

/** Sends `req` on to `port` as it came (its Host header kept), and resolves with the answer. */
function forward(
  req: IncomingMessage,
  port: number,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const upstream = request(
      {
        host: '127.0.0.1',
        port,
        method: req.method,
        path: req.url,
        headers: req.headers,
        timeout: ANSWER_BOUND_MS,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    upstream.on('timeout', () =>
      upstream.destroy(new Error(`no answer from port ${port}`)),
    );
    upstream.on('error', reject);
    upstream.end();
  });
}

function outcomeOf(body: string): string | undefined {
  try {
    return (JSON.parse(body) as { outcome?: string }).outcome;
  } catch {
    return undefined;
  }
}

/**
 * The front end: every request goes to `a`, except a catch-up, which goes to `a` and `b` at once
 * while Scheduler's own delivery of the same slot goes to `schedulerTo(job)`; the catch-up is
 * answered with `a`'s answer. Every delivery of the race is kept in `race`.
 */
async function startFrontEnd(
  a: Process,
  b: Process,
  schedulerTo: (jobName: string) => Process,
) {
  const race: RaceDelivery[] = [];
  const raceOne = async (
    jobName: string,
    slot: string,
    from: RaceDelivery['from'],
    sent: Promise<{ status: number; body: string }>,
    to: Process,
  ) => {
    const { status, body } = await sent;
    race.push({
      jobName,
      slot,
      from,
      to: to.port,
      status,
      outcome: outcomeOf(body),
    });
    return { status, body };
  };
  const catchUp = async (req: IncomingMessage, res: ServerResponse) => {
    const jobName = String(req.headers['x-cloudscheduler-jobname']);
    const slot = String(req.headers['x-cloudscheduler-scheduletime']);
    const scheduler = schedulerTo(jobName);
    const [first] = await Promise.all([
      raceOne(jobName, slot, 'catch-up', forward(req, a.port), a),
      raceOne(jobName, slot, 'catch-up', forward(req, b.port), b),
      raceOne(
        jobName,
        slot,
        'scheduler',
        deliver(scheduler.url, scheduled(jobName, slot)).then((d) => ({
          status: d.status,
          body: JSON.stringify(d.body),
        })),
        scheduler,
      ),
    ]);
    res.writeHead(first.status, { 'content-type': 'application/json' });
    res.end(first.body);
  };
  const server = createServer((req, res) => {
    const answered =
      req.headers[CATCH_UP_HEADER] === 'true'
        ? catchUp(req, res)
        : forward(req, a.port).then(({ status, body }) => {
            res.writeHead(status, { 'content-type': 'application/json' });
            res.end(body);
          });
    answered.catch((err: unknown) => {
      res.writeHead(502, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ outcome: 'front_end_error', message: String(err) }),
      );
    });
  });
  servers.push(server);
  const port = await freePort();
  await new Promise<void>((resolve) =>
    server.listen(port, '127.0.0.1', resolve),
  );
  return { url: `http://127.0.0.1:${port}/`, race };
}

/** Every execution the jobs recorded in `file`. */
function executionsIn(file: string): CatchUpExecution[] {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as CatchUpExecution);
}

/** The log lines of `children` with `message` for `slot`, parsed. */
function logLines(
  processes: readonly Process[],
  message: string,
  slot: string,
): Record<string, unknown>[] {
  return processes
    .flatMap((p) => p.child.output().split('\n'))
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.message === message && line.slot === slot);
}

/** The processes' log lines of the audits and late runs, for a failure's message. */
function auditLines(processes: readonly Process[]): string {
  return processes
    .flatMap((p) => p.child.output().split('\n'))
    .filter((line) => /audit|late run|catch/i.test(line))
    .join('\n');
}

const floorTo = (ms: number, step: number) => Math.floor(ms / step) * step;

/**
 * The late-run mark an earlier audit's scan would have left for `jobName`: every slot before
 * `judgedBefore` judged, a run of the job seen (the fields `policy/late-runs.ts` writes).
 */
async function writeEarlierAuditMark(
  collection: string,
  jobName: string,
  judgedBefore: number,
) {
  await firestore
    .collection(jobStateCollection(collection))
    .doc(lateDocumentId(jobName, []))
    .set({
      job_name: jobName,
      late_judged_before: Timestamp.fromMillis(judgedBefore),
      run_seen: true,
      pending: [],
      expire_at: Timestamp.fromMillis(Date.now() + 86_400_000),
    });
}

describe('catch-up racing Scheduler’s late delivery across two processes', () => {
  it('executes the late slot once when the audit’s catch-up reaches both processes as Scheduler’s own delivery arrives', {
    timeout: 120_000,
  }, async (t) => {
    const collection = freshCollection();
    const file = join(scratch, `${collection}.jsonl`);
    const env = {
      RUNS_COLLECTION: collection,
      CATCH_UP_EXECUTIONS_FILE: file,
      EXPOSE_ERRORS: 'true',
    };
    const [a, b] = await Promise.all([startProcess(env), startProcess(env)]);
    const frontEnd = await startFrontEnd(a, b, (jobName) =>
      jobName === 'tick' ? a : b,
    );

    // Scheduler sent nothing for the late slot, and delivered the one after it.
    const late = floorTo(Date.now(), MINUTE) - LATE_MINUTES_AGO * MINUTE;
    const after = late + MINUTE;
    for (const [jobName, to] of [
      ['tick', a],
      ['tock', b],
    ] as const) {
      await writeEarlierAuditMark(collection, jobName, late);
      const ran = await deliver(to.url, scheduled(jobName, rfc3339(after)));
      assert.equal(ran.body.outcome, 'processed', JSON.stringify(ran.body));
    }
    const audit = floorTo(Date.now(), 5 * MINUTE);
    const second: Delivery = await deliver(
      frontEnd.url,
      scheduled('run-audit', rfc3339(audit)),
      { signal: AbortSignal.timeout(ANSWER_BOUND_MS) },
    );
    assert.equal(second.body.outcome, 'processed', JSON.stringify(second.body));

    const slot = new Date(late).toISOString();
    // The race: two catch-ups and Scheduler's delivery of each job's slot, all answered.
    const raced = await waitFor(
      'every delivery of the race to be answered',
      () => (frontEnd.race.length === 6 ? frontEnd.race : undefined),
      ANSWER_BOUND_MS,
    ).catch((err: unknown) => {
      throw new Error(
        `${String(err)}; race so far ${JSON.stringify(frontEnd.race)}\n${auditLines([a, b])}`,
      );
    });
    t.diagnostic(`race: ${JSON.stringify(raced)}`);
    // The executions still running end within their 1.5 s of work.
    await within(sleep(3_000), 10_000, 'executions to end');
    const executions = executionsIn(file);
    t.diagnostic(`executions: ${JSON.stringify(executions)}`);
    for (const jobName of ['tick', 'tock']) {
      const deliveries = raced.filter((d) => d.jobName === jobName);
      assert.deepEqual(
        deliveries.map((d) => d.from).sort(),
        ['catch-up', 'catch-up', 'scheduler'],
        `${jobName}: the catch-up reached both processes, Scheduler's delivery one`,
      );
      assert.ok(
        deliveries.every((d) => Date.parse(d.slot) === late),
        `${jobName}: every delivery of the race was of the late slot`,
      );
      const ranLate = executions.filter(
        (e) => e.jobName === jobName && e.slot === slot,
      );
      assert.equal(
        ranLate.length,
        1,
        `${jobName}: slot ${slot} executed once: ${JSON.stringify(ranLate)}`,
      );
      const processed = deliveries.filter((d) => d.outcome === 'processed');
      assert.equal(
        processed.length,
        1,
        `${jobName}: one delivery ran it, the others were told so: ${JSON.stringify(deliveries)}`,
      );
      assert.equal(
        processed[0]?.from === 'catch-up',
        ranLate[0]?.caughtUp,
        `${jobName}: the execution knew whether it was the catch-up`,
      );
      assert.equal(
        logLines([a, b], 'late run', slot).filter((l) => l.jobName === jobName)
          .length,
        1,
        `${jobName}: the slot was named late once`,
      );
    }
    const afterSlot = new Date(after).toISOString();
    assert.equal(
      executions.filter((e) => e.slot === afterSlot).length,
      2,
      'the slots after it ran once each, by Scheduler',
    );
  });
});
