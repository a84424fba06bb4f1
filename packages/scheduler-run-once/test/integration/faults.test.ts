/**
 * Exactly once under faults, load and bad input. Every case drives
 * `test/fixtures/fault-function.ts` (src/index.ts's wiring around a test job) as a separate
 * functions-framework process over real HTTP on 127.0.0.1, counts job executions in a file that
 * outlives the process, and reads the run records back from the Firestore emulator.
 *
 * Bounds are stated next to each case and printed with the measured figures (`t.diagnostic`). They
 * were measured on 2 shared, busy cores and leave room for a slower machine.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import {
  type Delivery,
  deliver,
  type Emulator,
  type ExecutionEvent,
  type FunctionProcess,
  freshCollection,
  rawDelivery,
  removeScratch,
  scheduled,
  sleep,
  startEmulator,
  startFunction,
  storedRunOf,
  storedRuns,
  waitFor,
  warmUp,
} from '../fixtures/harness.ts';
import { PAST_NOON } from '../fixtures/times.ts';

after(removeScratch);

/** All requests of one storm answered within this, ms (measured: see the case's diagnostic). */
const STORM_BOUND_MS = 20_000;
/** A delivery while Firestore is down is answered 5xx within this, ms (FIRESTORE_TIMEOUT_SECONDS 2). */
const FIRESTORE_DOWN_BOUND_MS = 5_000;
/** After the emulator is back, a retried delivery is processed within this, ms (lease 3 s included). */
const RECOVERY_BOUND_MS = 30_000;

/** The events of one kind, e.g. every `start` of a run. */
function only(
  events: ExecutionEvent[],
  event: ExecutionEvent['event'],
): ExecutionEvent[] {
  return events.filter((e) => e.event === event);
}

/** How many deliveries got each `status outcome`. */
function tally(deliveries: readonly Delivery[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const d of deliveries) {
    const key = `${d.status} ${d.body.outcome ?? '-'}`;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

/** A delivery still in flight: never rejects, so it can wait while the case goes on. */
function inFlight(delivery: Promise<Delivery>): Promise<Delivery | Error> {
  return delivery.catch((err: unknown) =>
    err instanceof Error ? err : new Error(String(err)),
  );
}

/** Waits until `fn`'s job `jobName` started, and returns that first start. */
function firstStart(
  fn: FunctionProcess,
  jobName: string,
): Promise<ExecutionEvent> {
  return waitFor(
    `job ${jobName} to start`,
    () => only(fn.executions(), 'start').find((e) => e.jobName === jobName),
    20_000,
  );
}

/**
 * Waits until `fn`'s output matches `pattern` (5 s at most), and returns the output. The process's
 * stdout reaches this test through a pipe, so a log line can arrive after the HTTP answer it reports.
 */
function outputMatching(fn: FunctionProcess, pattern: RegExp): Promise<string> {
  return waitFor(
    `output matching ${pattern}`,
    () => (pattern.test(fn.output()) ? fn.output() : undefined),
    5_000,
  ).catch(() => fn.output());
}

/**
 * Waits until the run's lease, as stored (a heartbeat in flight may still extend it), has lapsed by
 * 250 ms; returns when that was seen (epoch ms).
 */
async function leaseLapsed(
  fn: FunctionProcess,
  runId: string,
): Promise<number> {
  return waitFor(
    `the lease of ${runId} to lapse`,
    async () => {
      const stored = await storedRunOf(fn, runId);
      return stored !== undefined && Date.now() > stored.leaseExpiresMs + 250
        ? Date.now()
        : undefined;
    },
    30_000,
  );
}

function ms(value: number): string {
  return `${Math.round(value)} ms`;
}

describe('one instance: a storm, a run slower than the attempt deadline, failing jobs', () => {
  let fn: FunctionProcess;
  before(async () => {
    fn = await startFunction();
    // Steady state: the Firestore client's first call (channel, credentials) is not what we measure.
    await warmUp(fn);
  });
  after(() => fn?.kill());

  it('runs a storm of 200 concurrent identical deliveries once; the rest get 409 or 200 duplicate, none 5xx', async (t) => {
    const headers = scheduled('storm_sleep200');

    const started = performance.now();
    const deliveries = await Promise.all(
      Array.from({ length: 200 }, () => deliver(fn.url, headers)),
    );
    const allAnsweredMs = performance.now() - started;

    const counts = tally(deliveries);
    const latencies = deliveries.map((d) => d.ms).sort((a, b) => a - b);
    t.diagnostic(
      `storm of 200: all answered in ${ms(allAnsweredMs)} (bound ${ms(STORM_BOUND_MS)}), ` +
        `latency p50 ${ms(latencies[100] ?? 0)}, max ${ms(latencies[199] ?? 0)}; ${JSON.stringify(counts)}`,
    );
    const runId = deliveries[0]?.body.runId ?? '';
    const starts = only(fn.executions(runId), 'start');
    assert.equal(counts['200 processed'], 1);
    assert.deepEqual(
      Object.keys(counts).filter(
        (k) =>
          !['200 processed', '409 in_progress', '200 duplicate'].includes(k),
      ),
      [],
      'every other delivery is 409 in_progress or 200 duplicate',
    );
    assert.ok(
      allAnsweredMs < STORM_BOUND_MS,
      `answered in ${ms(allAnsweredMs)}`,
    );
    assert.equal(starts.length, 1, 'the job ran once');
    const stored = await storedRunOf(fn, runId);
    assert.equal(stored?.status, 'completed');
    assert.equal(stored?.attemptId, starts[0]?.attemptId);
  });

  it('answers a retry during a run slower than the attempt deadline 409, and 200 duplicate once the run completed', async (t) => {
    const headers = scheduled('slow_sleep3000');
    const attemptDeadlineMs = 1_000;

    const first = await deliver(fn.url, headers, {
      signal: AbortSignal.timeout(attemptDeadlineMs),
    }).then(
      (d) => `answered ${d.status}`,
      (err: Error) => err.name,
    );
    const retry = await deliver(fn.url, headers);
    const runId = retry.body.runId ?? '';
    const retriedAt = performance.now();
    await waitFor(
      'the slow run to complete',
      async () =>
        (await storedRunOf(fn, runId))?.status === 'completed'
          ? true
          : undefined,
      15_000,
    );
    t.diagnostic(
      `run completed ${ms(performance.now() - retriedAt)} after the 409`,
    );
    const late = await deliver(fn.url, headers);

    assert.equal(
      first,
      'TimeoutError',
      'Scheduler gave up at its attempt deadline',
    );
    assert.equal(retry.status, 409);
    assert.equal(retry.body.outcome, 'in_progress');
    assert.match(
      retry.body.message ?? '',
      /Another attempt is running this run \(lease until/,
    );
    assert.equal(late.status, 200);
    assert.equal(late.body.outcome, 'duplicate');
    const events = fn.executions(runId);
    assert.equal(only(events, 'start').length, 1);
    assert.equal(
      only(events, 'end').length,
      1,
      'the first attempt finished its work',
    );
    assert.equal(
      (await storedRunOf(fn, runId))?.attemptId,
      only(events, 'start')[0]?.attemptId,
    );
    assert.ok(fn.alive());
  });

  for (const [how, token] of [
    ['throws synchronously', 'throwfirst'],
    ['rejects', 'rejectfirst'],
  ] as const) {
    it(`answers 500 and releases the run when the job ${how}; the process lives on and the immediate retry completes the run`, async () => {
      const headers = scheduled(`failing_${token}`);

      const failed = await deliver(fn.url, headers);
      const runId = failed.body.runId ?? '';
      const afterFailure = await storedRunOf(fn, runId);
      const retried = await deliver(fn.url, headers);

      assert.equal(failed.status, 500);
      assert.equal(failed.body.outcome, 'failed');
      assert.match(
        failed.body.message ?? '',
        /The job failed.*the claim is released/,
      );
      assert.equal(
        afterFailure?.status,
        'failed',
        'the failure was recorded for a retry',
      );
      assert.ok(fn.alive(), 'the process survived the failure');
      assert.equal(retried.status, 200);
      assert.equal(retried.body.outcome, 'processed');
      const events = fn.executions(runId);
      assert.equal(only(events, 'start').length, 2);
      assert.equal(only(events, 'fail').length, 1);
      assert.equal(only(events, 'end').length, 1);
      const stored = await storedRunOf(fn, runId);
      assert.equal(stored?.status, 'completed');
      assert.equal(stored?.attemptId, only(events, 'end')[0]?.attemptId);
    });
  }

  it('answers a job whose fire-and-forget promise rejects in JSON, as the log says, and lives on', async () => {
    const headers = scheduled('forgetful_forgetreject_sleep300');

    const res = await deliver(fn.url, headers);
    const again = await deliver(fn.url, headers);

    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.outcome, 'processed');
    assert.equal(again.body.outcome, 'duplicate');
    assert.ok(fn.alive(), 'the process survived the unhandled rejection');
    assert.equal(
      (await storedRunOf(fn, res.body.runId ?? ''))?.status,
      'completed',
    );
    const lines = (
      await outputMatching(
        fn,
        /^(?=[\s\S]*unhandled error left)(?=[\s\S]*"outcome":"processed")/,
      )
    )
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const rejection = lines.find((l) =>
      /^unhandled error left by the job/.test(String(l.message)),
    );
    assert.equal(rejection?.severity, 'ERROR');
    assert.equal(rejection?.runId, res.body.runId, 'logged against its run');
    assert.match(JSON.stringify(rejection), /a fire-and-forget call failed/);
    const answered = lines.find(
      (l) => l.runId === res.body.runId && l.outcome === 'processed',
    );
    assert.equal(
      answered?.status,
      200,
      'the log reports the status the client got',
    );
  });
});

describe('a crash mid-job (kill -9)', () => {
  // A second instance, started and warmed before the crash, answers the delivery "before the lease
  // expires": the restarted instance's cold start alone can outlast a 3 s lease.
  const options = {
    env: { LEASE_SECONDS: '3' },
    collection: freshCollection(),
  };
  let crashing: FunctionProcess;
  let other: FunctionProcess;
  let restarted: FunctionProcess | undefined;
  before(async () => {
    [crashing, other] = await Promise.all([
      startFunction(options),
      startFunction(options),
    ]);
    await warmUp(other);
  });
  after(() =>
    Promise.all([crashing?.kill(), other?.kill(), restarted?.kill()]),
  );

  it('holds the run 409 until the dead attempt’s lease lapses; then the restarted instance runs it again and completes the record', async (t) => {
    const jobName = 'crash_holdfirst';
    const headers = scheduled(jobName);
    const pending = inFlight(deliver(crashing.url, headers));
    const dead = await firstStart(crashing, jobName);

    await crashing.kill();
    const killedAt = Date.now();
    const lost = await pending;
    const early = await deliver(other.url, headers);
    const earlyAt = Date.now();
    const held = await storedRunOf(other, dead.runId);
    restarted = await crashing.restart();
    const restartedAt = Date.now();
    const lapsed = await leaseLapsed(restarted, dead.runId);
    const late = await deliver(restarted.url, headers);
    const afterwards = await deliver(other.url, headers);
    t.diagnostic(
      `409 answered ${ms(earlyAt - killedAt)} after the kill, ${ms((held?.leaseExpiresMs ?? 0) - earlyAt)} ` +
        `before the lease lapsed; restarted in ${ms(restartedAt - earlyAt)}; ` +
        `takeover ${ms(Date.now() - lapsed)} after the lapse, in ${ms(late.ms)}`,
    );

    assert.ok(lost instanceof Error, 'the crashed delivery got no answer');
    assert.equal(early.status, 409);
    assert.equal(early.body.outcome, 'in_progress');
    assert.ok(
      earlyAt < (held?.leaseExpiresMs ?? 0),
      'the 409 came before the lease lapsed',
    );
    assert.equal(held?.status, 'in_progress');
    assert.equal(held?.attemptId, dead.attemptId);
    assert.equal(late.status, 200);
    assert.equal(late.body.outcome, 'processed');
    assert.equal(afterwards.body.outcome, 'duplicate');
    const events = restarted.executions(dead.runId);
    const starts = only(events, 'start');
    assert.equal(starts.length, 2, 'the dead attempt and the takeover');
    assert.deepEqual(
      events.filter((e) => e.attemptId === dead.attemptId).map((e) => e.event),
      ['start'],
      'the dead attempt never finished',
    );
    const stored = await storedRunOf(restarted, dead.runId);
    assert.equal(stored?.status, 'completed');
    assert.equal(stored?.attemptId, starts[1]?.attemptId);
    const takeover = /"takeover":true[^\n]*"scheduled run: processed"/;
    assert.match(await outputMatching(restarted, takeover), takeover);
  });
});

describe('an exception outside any request (a module-level timer throws)', () => {
  let fn: FunctionProcess;
  before(async () => {
    fn = await startFunction();
    await warmUp(fn);
  });
  after(() => fn?.kill());

  it('drains like SIGTERM: the run in flight is released (failed, not in_progress), an ERROR line names it, and the process exits non-zero', async () => {
    const res = await deliver(fn.url, scheduled('crash_crashoutside'));
    const code = await fn.exitCode();

    assert.equal(res.status, 500, JSON.stringify(res.body));
    assert.equal(
      res.body.outcome,
      'failed',
      'a JSON answer, not the plain-text crash page',
    );
    assert.match(res.body.message ?? '', /claim is released/);
    const runId = res.body.runId ?? '';
    const stored = await storedRunOf(fn, runId);
    assert.equal(
      stored?.status,
      'failed',
      'released, so a retry runs it at once',
    );
    const crash = fn
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) =>
        /^uncaught exception outside any request/.test(String(l.message)),
      );
    assert.equal(crash?.severity, 'ERROR');
    assert.deepEqual(crash?.runIds, [runId]);
    assert.match(JSON.stringify(crash), /a module-level timer threw/);
    assert.equal(code, 16);
  });
});

describe('leases that lapse, and completions that fail', () => {
  // While its process lives, an attempt's heartbeat extends its lease; a zombie is an attempt whose
  // process stopped (a stop-the-world pause, SIGSTOP here) for longer than the lease, then went on.
  const options = {
    env: { LEASE_SECONDS: '3' },
    collection: freshCollection(),
  };
  let paused: FunctionProcess;
  let taker: FunctionProcess;
  before(async () => {
    [paused, taker] = await Promise.all([
      startFunction(options),
      startFunction(options),
    ]);
    await Promise.all([warmUp(paused), warmUp(taker)]);
  });
  after(() => Promise.all([paused?.kill(), taker?.kill()]));

  for (const [how, jobName, status, outcome, message] of [
    [
      'succeeds',
      'zombie_ok_holdfirst',
      200,
      'processed',
      /The job ran, but lease lost: no lease extension ran for a whole lease because this instance was paused/,
    ],
    [
      'fails',
      'zombie_fail_holdfirst_rejectfirst',
      500,
      'failed',
      /The job failed.*lease lost: no lease extension ran for a whole lease because this instance was paused/,
    ],
  ] as const) {
    it(`lets a zombie attempt that ${how} after its lease lapsed change nothing of the attempt that took over`, async (t) => {
      const headers = scheduled(jobName);
      const zombie = inFlight(deliver(paused.url, headers));
      const a = await firstStart(paused, jobName);
      paused.pause();
      await leaseLapsed(taker, a.runId);

      const b = await deliver(taker.url, headers);
      const afterB = await storedRunOf(taker, a.runId);
      paused.resume();
      paused.release(a.runId);
      const answer = await zombie;
      const afterA = await storedRunOf(taker, a.runId);
      t.diagnostic(
        `B took over in ${ms(b.ms)}; the zombie answered ${JSON.stringify(answer)}`,
      );

      assert.equal(b.status, 200);
      assert.equal(b.body.outcome, 'processed');
      assert.equal(afterB?.status, 'completed');
      assert.notEqual(afterB?.attemptId, a.attemptId);
      assert.ok(!(answer instanceof Error), String(answer));
      assert.equal(answer.status, status);
      assert.equal(answer.body.outcome, outcome);
      assert.match(answer.body.message ?? '', message);
      assert.doesNotMatch(answer.body.message ?? '', /claim is released/);
      assert.deepEqual(
        afterA,
        afterB,
        'same status, attempt_id and updateTime',
      );
      assert.equal(
        only(taker.executions(a.runId), 'start').length,
        2,
        'both did the work: the documented limit',
      );
      const leaseLost = /lease lost: .*another attempt took the run over/;
      assert.match(await outputMatching(paused, leaseLost), leaseLost);
      assert.ok(paused.alive());
    });
  }

  it('records a completion whose first write failed on its retry, and never runs the run again', async () => {
    const headers = scheduled('flaky_losecompletion1');

    const first = await deliver(taker.url, headers);
    const runId = first.body.runId ?? '';
    const retries = await Promise.all([
      deliver(taker.url, headers),
      deliver(paused.url, headers),
    ]);

    assert.equal(first.status, 200);
    assert.match(first.body.message ?? '', /its completion is recorded/);
    assert.deepEqual(tally(retries), { '200 duplicate': 2 });
    assert.equal(only(taker.executions(runId), 'start').length, 1);
    const stored = await storedRunOf(taker, runId);
    assert.equal(stored?.status, 'completed');
    assert.equal(
      stored?.attemptId,
      only(taker.executions(runId), 'end')[0]?.attemptId,
    );
  });

  it('records a completion it could not record at the next delivery of the run on the same instance: duplicate, never a second run', async () => {
    const headers = scheduled('lost_losecompletion3');

    const first = await deliver(taker.url, headers);
    const runId = first.body.runId ?? '';
    const held = await storedRunOf(taker, runId);
    const retry = await deliver(taker.url, headers);

    assert.equal(
      first.status,
      200,
      'the work is done: a 5xx would have Scheduler redo it at once',
    );
    assert.match(
      first.body.message ?? '',
      /did not record its completion; a later delivery may run it again/,
    );
    assert.equal(
      held?.status,
      'in_progress',
      'the completion was not recorded',
    );
    assert.equal(retry.status, 200);
    assert.equal(retry.body.outcome, 'duplicate');
    assert.equal(
      only(taker.executions(runId), 'start').length,
      1,
      'it ran once',
    );
    assert.equal((await storedRunOf(taker, runId))?.status, 'completed');
  });
});

describe('Firestore faults (an emulator of this block’s own)', () => {
  let emulator: Emulator;
  // A long lease for the freeze: no heartbeat write is in flight when Firestore stops answering.
  let frozen: FunctionProcess;
  // A short lease for the outage: a claim that lands after its delivery gave up lapses quickly.
  let outage: FunctionProcess;
  before(async () => {
    emulator = await startEmulator();
    const env = {
      FIRESTORE_EMULATOR_HOST: emulator.host,
      FIRESTORE_TIMEOUT_SECONDS: '2',
    };
    [frozen, outage] = await Promise.all([
      startFunction({ env: { ...env, LEASE_SECONDS: '30' } }),
      startFunction({ env: { ...env, LEASE_SECONDS: '3' } }),
    ]);
    await Promise.all([warmUp(frozen), warmUp(outage)]);
  });
  after(async () => {
    await Promise.all([frozen?.kill(), outage?.kill()]);
    await emulator?.stop();
  });

  // Before the outage case: restarting the emulator loses its data.
  it('records the completion on its retry when the first write hangs after the job succeeded, so the run never runs again', async (t) => {
    const jobName = 'frozen_holdfirst';
    const headers = scheduled(jobName);
    const pending = inFlight(deliver(frozen.url, headers));
    const start = await firstStart(frozen, jobName);

    // Firestore stops answering (connections stay open, nothing is lost) as the job returns: the
    // completion's first try times out after 2 s; the emulator wakes during the second try.
    emulator.freeze();
    const frozenAt = performance.now();
    frozen.release(start.runId);
    await sleep(2_500);
    emulator.thaw();
    const done = await pending;
    const answeredAfterMs = performance.now() - frozenAt;
    const retries = await Promise.all([
      deliver(frozen.url, headers),
      deliver(frozen.url, headers),
    ]);
    t.diagnostic(
      `answered ${ms(answeredAfterMs)} after the freeze; retries ${JSON.stringify(tally(retries))}`,
    );

    assert.ok(!(done instanceof Error), String(done));
    assert.equal(done.status, 200);
    assert.equal(done.body.outcome, 'processed');
    assert.match(done.body.message ?? '', /its completion is recorded/);
    assert.ok(answeredAfterMs >= 2_000, 'the first completion write timed out');
    assert.deepEqual(tally(retries), { '200 duplicate': 2 });
    assert.equal(only(frozen.executions(start.runId), 'start').length, 1);
    const stored = await storedRunOf(frozen, start.runId);
    assert.equal(stored?.status, 'completed');
    assert.equal(stored?.attemptId, start.attemptId);
  });

  it('answers 5xx within 5 s without running the job while Firestore is down, and processes the run once it is back', async (t) => {
    if (!emulator.running()) {
      await emulator.start();
    }
    const headers = scheduled('outage');

    await emulator.stop();
    const down = await deliver(outage.url, headers);
    const runId = down.body.runId ?? '';
    const executionsWhileDown = outage.executions(runId).length;
    const restart = performance.now();
    await emulator.start();
    const restartMs = performance.now() - restart;
    const retries: Delivery[] = [];
    const back = performance.now();
    const recovered = await waitFor(
      'a retry to be processed',
      async () => {
        const d = await deliver(outage.url, headers);
        retries.push(d);
        if (d.status === 200) {
          return d;
        }
        await sleep(250);
        return undefined;
      },
      RECOVERY_BOUND_MS,
    );
    const recoveryMs = performance.now() - back;
    // The client keeps retrying the claim that timed out; it can land once Firestore is back. Its
    // lease was set when it was sent, so it holds the run (409) for at most LEASE_SECONDS.
    const processedLine = outage
      .output()
      .split('\n')
      .find((l) => l.includes(runId) && l.includes('scheduled run: processed'));
    t.diagnostic(
      `down: ${down.status} ${down.body.outcome} in ${ms(down.ms)} (bound ${ms(FIRESTORE_DOWN_BOUND_MS)}); ` +
        `emulator restart ${ms(restartMs)}; processed ${ms(recoveryMs)} after it was back ` +
        `(bound ${ms(RECOVERY_BOUND_MS)}); retries: ${retries.map((r) => `${r.status} ${r.body.outcome}`).join(', ')}; ` +
        `the timed-out claim ${/"takeover":true/.test(processedLine ?? '') ? 'had landed (takeover)' : 'never landed'}`,
    );

    assert.equal(down.status, 500);
    assert.equal(down.body.outcome, 'unavailable');
    assert.match(
      down.body.message ?? '',
      /Firestore is unavailable.*the job was not run/,
    );
    assert.ok(down.ms < FIRESTORE_DOWN_BOUND_MS, `answered in ${ms(down.ms)}`);
    assert.equal(executionsWhileDown, 0);
    assert.equal(recovered.body.outcome, 'processed');
    for (const r of retries.slice(0, -1)) {
      assert.ok(
        [409, 500].includes(r.status),
        `a retry before recovery got ${r.status}`,
      );
    }
    const starts = only(outage.executions(runId), 'start');
    assert.equal(starts.length, 1);
    const stored = await storedRunOf(outage, runId);
    assert.equal(stored?.status, 'completed');
    assert.equal(stored?.attemptId, starts[0]?.attemptId);
    assert.ok(outage.alive());
  });
});

/** A request as raw bytes: header lines end with CRLF; `Connection: close` ends the exchange. */
function rawPost(headerLines: string, body = ''): string {
  return (
    `POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n${headerLines}Connection: close\r\n` +
    `Content-Length: ${Buffer.byteLength(body, 'latin1')}\r\n\r\n${body}`
  );
}

function utf8(text: string): Uint8Array {
  return Buffer.from(text, 'utf8');
}

const JOB = 'bad_input';
const TIME = PAST_NOON;
const JOB_LINE = `X-CloudScheduler-JobName: ${JOB}\r\n`;
const TIME_LINE = `X-CloudScheduler-ScheduleTime: ${TIME}\r\n`;

/** One bad delivery: what is sent, and what must come back. */
interface BadInput {
  readonly name: string;
  /** Headers and body for fetch, or raw bytes for what fetch refuses to send. */
  readonly send:
    | { headers: Record<string, string>; body?: Uint8Array | string }
    | { raw: string | Uint8Array };
  /** Our 400 `invalid_request` with a message matching this; or what Node or Express answer first. */
  readonly expect:
    | RegExp
    | { readonly status: number; readonly by: 'Node' }
    | {
        readonly status: number;
        readonly by: 'the body parser';
        readonly outcome: string;
      };
}

const sends = (headers: Record<string, string>, body?: Uint8Array | string) =>
  body === undefined ? { headers } : { headers, body };

const NOT_A_JOB = /X-CloudScheduler-JobName ".*" is not a job id/;
const NOT_RFC3339 =
  /X-CloudScheduler-ScheduleTime ".*" is not an RFC 3339 date-time; use RFC 3339 with an offset/;
const TWENTY_MB = 20 * 1024 * 1024;

/**
 * What only a process shows: raw bytes Node decodes or refuses, bodies, repeated and
 * whitespace-only headers on the wire. The header-value cases (job ids, schedule times) are in
 * test/unit/scheduler-request.test.ts, in-process.
 */
const BAD_INPUTS: readonly BadInput[] = [
  {
    name: 'no Scheduler headers at all',
    send: sends({}),
    expect: /X-CloudScheduler-JobName is missing/,
  },
  {
    name: 'a whitespace-only JobName',
    send: { raw: rawPost(`X-CloudScheduler-JobName:  \t \r\n${TIME_LINE}`) },
    expect: /X-CloudScheduler-JobName is empty/,
  },
  {
    name: 'a whitespace-only ScheduleTime',
    send: { raw: rawPost(`${JOB_LINE}X-CloudScheduler-ScheduleTime: \t\r\n`) },
    expect: /X-CloudScheduler-ScheduleTime is empty/,
  },
  {
    name: 'JobName sent twice',
    send: { raw: rawPost(`${JOB_LINE}${JOB_LINE}${TIME_LINE}`) },
    expect: /X-CloudScheduler-JobName was sent 2 times; send it exactly once/,
  },
  {
    name: 'ScheduleTime sent twice, once lowercase (HTTP/2 style)',
    send: {
      raw: rawPost(
        `${JOB_LINE}${TIME_LINE}x-cloudscheduler-scheduletime: ${TIME}\r\n`,
      ),
    },
    expect: /X-CloudScheduler-ScheduleTime was sent 2 times/,
  },
  {
    name: 'JobName sent three times with different values',
    send: {
      raw: rawPost(
        `${JOB_LINE}X-CloudScheduler-JobName: b\r\nx-cloudscheduler-jobname: c\r\n${TIME_LINE}`,
      ),
    },
    expect: /X-CloudScheduler-JobName was sent 3 times/,
  },
  {
    name: 'a JobName with a tab inside',
    send: {
      raw: rawPost(`X-CloudScheduler-JobName: nightly\treport\r\n${TIME_LINE}`),
    },
    expect: NOT_A_JOB,
  },
  {
    name: 'a non-ASCII JobName (raw UTF-8)',
    send: {
      raw: utf8(
        rawPost(
          `X-CloudScheduler-JobName: nächtlicher-bericht\r\n${TIME_LINE}`,
        ),
      ),
    },
    expect: NOT_A_JOB,
  },
  {
    name: 'full-width digits (raw UTF-8)',
    send: {
      raw: utf8(
        rawPost(
          `${JOB_LINE}X-CloudScheduler-ScheduleTime: ２０２６-10-16T12:00:00Z\r\n`,
        ),
      ),
    },
    expect: NOT_RFC3339,
  },
  {
    name: 'a control character (0x01) in JobName',
    send: {
      raw: rawPost(`X-CloudScheduler-JobName: nightly\x01\r\n${TIME_LINE}`),
    },
    expect: { status: 400, by: 'Node' },
  },
  {
    name: 'a NUL in ScheduleTime',
    send: {
      raw: rawPost(`${JOB_LINE}X-CloudScheduler-ScheduleTime: ${TIME}\x00\r\n`),
    },
    expect: { status: 400, by: 'Node' },
  },
  {
    name: 'DEL (0x7f) in JobName',
    send: {
      raw: rawPost(`X-CloudScheduler-JobName: night\x7fly\r\n${TIME_LINE}`),
    },
    expect: { status: 400, by: 'Node' },
  },
  {
    name: 'a folded (obs-fold) JobName line',
    send: {
      raw: rawPost(
        `X-CloudScheduler-JobName: nightly\r\n report\r\n${TIME_LINE}`,
      ),
    },
    expect: { status: 400, by: 'Node' },
  },
  {
    name: 'a space inside a header name',
    send: { raw: rawPost(`X-CloudScheduler JobName: ${JOB}\r\n${TIME_LINE}`) },
    expect: { status: 400, by: 'Node' },
  },
  {
    name: 'Content-Length and Transfer-Encoding together (request smuggling)',
    send: {
      raw: `POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n${JOB_LINE}${TIME_LINE}Connection: close\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
    },
    expect: { status: 400, by: 'Node' },
  },
  {
    // Over Node's 16 KB --max-http-header-size: refused before Express, 431 is the right answer.
    name: 'a 100 KB JobName header',
    send: {
      raw: rawPost(
        `X-CloudScheduler-JobName: ${'a'.repeat(102_400)}\r\n${TIME_LINE}`,
      ),
    },
    expect: { status: 431, by: 'Node' },
  },
  {
    name: 'a 20 MB JSON body without Scheduler headers',
    send: sends(
      { 'Content-Type': 'application/json' },
      `{"pad":"${'x'.repeat(TWENTY_MB)}"}`,
    ),
    expect: /X-CloudScheduler-JobName is missing/,
  },
  {
    name: 'a 20 MB binary body with a bad JobName',
    send: sends(
      { ...scheduled('a/b', TIME), 'Content-Type': 'application/octet-stream' },
      new Uint8Array(TWENTY_MB),
    ),
    expect: NOT_A_JOB,
  },
  {
    // functions-framework parses JSON bodies before the function runs; src/framework-workarounds.ts
    // answers its errors with the function's JSON shape.
    name: 'a body that is not JSON, sent as application/json',
    send: sends(
      { ...scheduled(JOB, TIME), 'Content-Type': 'application/json' },
      '{"run": nightly',
    ),
    expect: { status: 400, by: 'the body parser', outcome: 'invalid_request' },
  },
  {
    name: 'a gzip Content-Encoding on a body that is not gzip',
    send: sends(
      {
        ...scheduled(JOB, TIME),
        'Content-Type': 'application/json',
        'Content-Encoding': 'gzip',
      },
      '{}',
    ),
    expect: { status: 400, by: 'the body parser', outcome: 'invalid_request' },
  },
  {
    name: 'an unknown Content-Encoding',
    send: sends(
      {
        ...scheduled(JOB, TIME),
        'Content-Type': 'application/json',
        'Content-Encoding': 'rot13',
      },
      '{}',
    ),
    expect: {
      status: 415,
      by: 'the body parser',
      outcome: 'unsupported_encoding',
    },
  },
];

describe('bad input: 400 with a useful message, or what Node and Express refuse first; never 5xx, nothing written', () => {
  let fn: FunctionProcess;
  before(async () => {
    fn = await startFunction();
  });
  after(() => fn?.kill());

  for (const { name, send, expect } of BAD_INPUTS) {
    it(`refuses ${name}`, async (t) => {
      const res =
        'raw' in send
          ? await rawDelivery(fn.port, send.raw)
          : await deliver(
              fn.url,
              send.headers,
              send.body === undefined ? {} : { body: send.body },
            );
      if (res.ms > 1_000) {
        t.diagnostic(`answered in ${ms(res.ms)}`);
      }

      if (expect instanceof RegExp) {
        assert.equal(res.status, 400, JSON.stringify(res.body));
        assert.equal(res.body.outcome, 'invalid_request');
        assert.equal(res.body.runId, undefined);
        assert.match(res.body.message ?? '', expect);
        assert.ok(
          (res.body.message ?? '').length < 400,
          'the message quotes at most a prefix',
        );
      } else {
        assert.equal(
          res.status,
          expect.status,
          `${expect.by} answers ${expect.status}`,
        );
        if (expect.by === 'Node') {
          assert.equal(
            res.body.outcome,
            undefined,
            'refused before the function ran',
          );
        } else {
          assert.equal(
            res.body.outcome,
            expect.outcome,
            JSON.stringify(res.body),
          );
          assert.match(res.body.message ?? '', /request body|Content-Encoding/);
        }
      }
      assert.equal((await storedRuns(fn)).size, 0, 'nothing written');
      assert.ok(fn.alive(), 'the process is alive');
    });
  }

  it('still runs a valid delivery after all of them', async () => {
    const res = await deliver(fn.url, scheduled(JOB, TIME));

    assert.equal(res.status, 200);
    assert.equal(res.body.outcome, 'processed');
    assert.equal(only(fn.executions(), 'start').length, 1);
    assert.equal((await storedRuns(fn)).size, 1);
  });
});

describe('key scope', () => {
  let byHeader: FunctionProcess;
  let byParam: FunctionProcess;
  let unscoped: FunctionProcess;
  before(async () => {
    [byHeader, byParam, unscoped] = await Promise.all([
      startFunction({ env: { RUN_KEY_SCOPE_HEADERS: 'X-Tenant' } }),
      startFunction({ env: { RUN_KEY_SCOPE_PARAMS: 'region' } }),
      startFunction(),
    ]);
  });
  after(() =>
    Promise.all([byHeader?.kill(), byParam?.kill(), unscoped?.kill()]),
  );

  it('runs the same job and schedule time once per value of a scope header', async () => {
    const run = scheduled('scoped');

    const acme = await deliver(byHeader.url, { ...run, 'X-Tenant': 'acme' });
    const globex = await deliver(byHeader.url, {
      ...run,
      'X-Tenant': 'globex',
    });
    const acmeAgain = await deliver(byHeader.url, {
      ...run,
      'x-tenant': 'acme',
    });
    const unnamed = await deliver(byHeader.url, run);

    assert.deepEqual(tally([acme, globex]), { '200 processed': 2 });
    assert.notEqual(acme.body.runId, globex.body.runId);
    assert.equal(acmeAgain.body.outcome, 'duplicate');
    assert.equal(unnamed.status, 400);
    assert.match(
      unnamed.body.message ?? '',
      /Scope header x-tenant is missing/,
    );
    assert.equal(only(byHeader.executions(), 'start').length, 2);
    const stored = [...(await storedRuns(byHeader)).values()];
    assert.deepEqual(
      stored.map((r) => r.status),
      ['completed', 'completed'],
    );
  });

  it('runs the same job and schedule time once per value of a scope query parameter', async () => {
    const run = scheduled('scoped');

    const us = await deliver(byParam.url, run, { query: '?region=us' });
    const eu = await deliver(byParam.url, run, { query: '?region=eu' });
    const usAgain = await deliver(byParam.url, run, {
      query: '?region=us&other=1',
    });
    const both = await deliver(byParam.url, run, {
      query: '?region=us&region=eu',
    });

    assert.deepEqual(tally([us, eu]), { '200 processed': 2 });
    assert.notEqual(us.body.runId, eu.body.runId);
    assert.equal(usAgain.body.outcome, 'duplicate');
    assert.equal(both.status, 400);
    assert.match(
      both.body.message ?? '',
      /Scope query parameter region was sent 2 times/,
    );
    assert.equal(only(byParam.executions(), 'start').length, 2);
    assert.equal((await storedRuns(byParam)).size, 2);
  });

  it('runs it once without a scope, whatever headers and parameters the deliveries carry', async () => {
    const run = scheduled('scoped');

    const first = await deliver(
      unscoped.url,
      { ...run, 'X-Tenant': 'acme' },
      { query: '?region=us' },
    );
    const second = await deliver(
      unscoped.url,
      { ...run, 'X-Tenant': 'globex' },
      { query: '?region=eu' },
    );

    assert.equal(first.body.outcome, 'processed');
    assert.equal(second.body.outcome, 'duplicate');
    assert.equal(second.body.runId, first.body.runId);
    assert.equal(only(unscoped.executions(), 'start').length, 1);
    assert.equal((await storedRuns(unscoped)).size, 1);
  });
});

describe('logs at LOG_LEVEL=trace', () => {
  const token = randomUUID();
  const bodySecret = `body-secret-${randomUUID()}`;
  const jobSecret = `job-secret-${randomUUID()}`;
  let fn: FunctionProcess;
  before(async () => {
    fn = await startFunction({
      env: { LOG_LEVEL: 'trace', FAULT_SECRET: `Bearer ${jobSecret}` },
    });
  });
  after(() => fn?.kill());

  it('never carry an Authorization value or any request body content, across every outcome', async (t) => {
    const auth = {
      Authorization: `Bearer ${token}`,
      'X-Cloud-Trace-Context': `${'a'.repeat(32)}/1;o=1`,
    };
    const json = { 'Content-Type': 'application/json' };
    const body = JSON.stringify({ token: bodySecret });

    const processed = await deliver(
      fn.url,
      { ...scheduled('logs_logsecret'), ...auth, ...json },
      { body },
    );
    const duplicate = await deliver(
      fn.url,
      { ...scheduled('logs_logsecret'), ...auth, 'Content-Type': 'text/plain' },
      { body: bodySecret },
    );
    const slow = inFlight(
      deliver(
        fn.url,
        { ...scheduled('logs_sleep1500'), ...auth, ...json },
        { body },
      ),
    );
    await firstStart(fn, 'logs_sleep1500');
    const inProgress = await deliver(
      fn.url,
      { ...scheduled('logs_sleep1500'), ...auth, ...json },
      { body },
    );
    const failed = await deliver(
      fn.url,
      {
        ...scheduled('logs_throwfirst'),
        ...auth,
        'Content-Type': 'application/x-www-form-urlencoded',
      },
      { body: `token=${bodySecret}` },
    );
    const retried = await deliver(
      fn.url,
      { ...scheduled('logs_throwfirst'), ...auth, ...json },
      { body },
    );
    const invalid = await deliver(
      fn.url,
      { 'X-CloudScheduler-JobName': 'logs', ...auth, ...json },
      { body },
    );
    const binary = await deliver(
      fn.url,
      {
        ...scheduled('logs/bad'),
        ...auth,
        'Content-Type': 'application/octet-stream',
      },
      { body: utf8(bodySecret) },
    );
    const slowDone = await slow;
    const requestLines = () =>
      fn
        .output()
        .split('\n')
        .filter((l) => l.includes('"message":"scheduled run: '));
    await waitFor(
      '8 request lines',
      () => (requestLines().length >= 8 ? true : undefined),
      5_000,
    );
    const output = fn.output();
    const lines = output
      .split('\n')
      .filter((l) => l.includes('"message":"scheduled run: '));
    t.diagnostic(
      `${lines.length} request lines, ${output.split('\n').length} lines in all`,
    );

    assert.deepEqual(
      [processed, duplicate, inProgress, failed, retried, invalid, binary].map(
        (d) => d.status,
      ),
      [200, 200, 409, 500, 200, 400, 400],
    );
    assert.ok(!(slowDone instanceof Error) && slowDone.status === 200);
    assert.equal(lines.length, 8, 'every request logged its line');
    assert.match(
      output,
      /"authorization":"\[redacted\]"/,
      "the job's own log call was redacted",
    );
    for (const secret of [token, bodySecret, jobSecret]) {
      assert.ok(!output.includes(secret), `${secret} leaked into the logs`);
    }
    assert.equal(
      only(fn.executions(), 'start').length,
      4,
      'logsecret, sleep, throwfirst twice',
    );
    const stored = [...(await storedRuns(fn)).values()];
    assert.deepEqual(
      stored.map((r) => r.status),
      ['completed', 'completed', 'completed'],
    );
  });

  it('never carry the body of a request whose JSON is malformed', async () => {
    const res = await deliver(
      fn.url,
      {
        ...scheduled('logs_malformed'),
        Authorization: `Bearer ${token}`,
        'Content-Type': 'application/json',
      },
      { body: `{"token": ${bodySecret}` },
    );
    await waitFor(
      'the refusal line',
      () =>
        /request refused before the function ran/.test(fn.output())
          ? true
          : undefined,
      5_000,
    );

    assert.equal(res.status, 400);
    assert.equal(res.body.outcome, 'invalid_request');
    assert.ok(
      !fn.output().includes(bodySecret),
      'the body leaked into the logs',
    );
    assert.match(fn.output(), /request refused before the function ran/);
  });
});
