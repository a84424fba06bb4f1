/**
 * A clock off by ±90 s runs no job twice. Two instances of
 * `test/fixtures/fault-function.ts` share one collection of the Firestore emulator: one runs under
 * Debian's `faketime` with its wall clock (`Date.now()`) 90 s off, the other on the real clock.
 * One delivers a slow run (three leases long), the other gets the same run again and again while
 * it works. The run must execute once, every retry must answer 409 until the run completed and
 * 200 duplicate after, and the stored lease (`leased_at` + `lease_ms`) must stay live and no
 * longer than one lease by the emulator's clock, extended once per beat, not back to back.
 *
 * Against the code before server-time leases (05e64e3) the four cases where the skewed instance
 * claims first fail: at −90 s the job ran twice, because the cold instance's first claim wrote a
 * lease already expired and the serving one's heartbeat waited ~31 s on a 3 s lease; at +90 s the
 * cold instance's first lease was 92 s long, and the serving one extended every ~100 ms.
 *
 * `FAKETIME_DONT_FAKE_MONOTONIC=1`: a skewed machine's monotonic clock is right, so timers and
 * `performance.now()` run normally; only the wall clock is off. Each skew direction gets its own
 * collection and three instances (a cold skewed one, a serving skewed one, a correct one); the
 * two directions run concurrently, the cases of each one after the other.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import {
  type Delivery,
  deliver,
  type ExecutionEvent,
  type FunctionProcess,
  freshCollection,
  removeScratch,
  type StoredRun,
  scheduled,
  sleep,
  startFunction,
  storedRunOf,
  storedRunRead,
  type TimedRead,
  waitFor,
  warmUp,
} from '../fixtures/harness.ts';
import { faketimeWrapper, outerClockOffsetS } from '../fixtures/times.ts';

after(removeScratch);

const SKEW_S = 90;
/** The suite's own clock offset under an outer `faketime` (0 without): the skews are added to it. */
const OUTER_S = outerClockOffsetS();
const LEASE_MS = 3_000;
/** The job runs three leases: a lease computed from a skewed clock lapses while it works. */
const JOB_MS = 3 * LEASE_MS;
/** The heartbeat's beat: a third of the lease. */
const BEAT_MS = LEASE_MS / 3;
/** The most extensions a job of {@link JOB_MS} may cause: one per beat, and two to spare. */
const MAX_EXTENSIONS = JOB_MS / BEAT_MS + 2;
/**
 * The closest two extensions may land: a quarter beat. Beats are a beat apart, but a slow write
 * followed by a fast one lands closer on a busy machine; back-to-back writes land ~100 ms apart.
 */
const MIN_EXTENSION_GAP_MS = BEAT_MS / 4;
/** How often the other instance gets the run again while the job works. */
const RETRY_EVERY_MS = 250;
/** How often the record is read while the job works. */
const READ_EVERY_MS = 100;
/** How far an instance's clock, as its HTTP `Date` header shows it (whole seconds), may be off. */
const CLOCK_TOLERANCE_MS = 3_000;

/** The environment of every instance: a short lease, and only the wall clock faked. */
/** The job ids of the cases below, declared by the fixture (`FAULT_JOB_IDS`). */
const JOB_IDS = [`m${SKEW_S}`, `p${SKEW_S}`].flatMap((name) =>
  ['cold', 'serving', 'correctfirst'].map(
    (c) => `skew${name}_${c}_sleep${JOB_MS}`,
  ),
);
const ENV = {
  LEASE_SECONDS: String(LEASE_MS / 1000),
  FAKETIME_DONT_FAKE_MONOTONIC: '1',
  FAULT_JOB_IDS: JOB_IDS.join(','),
};

/**
 * Fails, with what to do, unless `faketime` is installed and shifts Node's `Date`: CI installs it
 * (`.ci/run`), so a missing one is a broken machine, not a case to skip.
 */
function requireFaketime(): void {
  const [command, ...args] = faketimeWrapper(OUTER_S + SKEW_S);
  const probe = spawnSync(
    command as string,
    [...args, process.execPath, '-e', 'console.log(Date.now())'],
    { encoding: 'utf8', env: { ...process.env, ...ENV } },
  );
  if (probe.error !== undefined || probe.status !== 0) {
    throw new Error(
      `libfaketime could not run (${probe.error?.message ?? probe.stderr}): this suite needs ` +
        "Debian's faketime to skew an instance's clock; install it with `apt-get install faketime` " +
        '(.ci/run does)',
    );
  }
  const offsetMs = Number(probe.stdout.trim()) - Date.now();
  assert.ok(
    Math.abs(offsetMs - SKEW_S * 1000) < CLOCK_TOLERANCE_MS,
    `libfaketime with FAKETIME=+${SKEW_S}s moved Node's Date by ${offsetMs} ms`,
  );
}

/** How far `fn`'s wall clock is off ours, ms, from its HTTP `Date` header (a GET touches no Firestore). */
async function clockOffsetOf(fn: FunctionProcess): Promise<number> {
  const res = await fetch(fn.url, { signal: AbortSignal.timeout(10_000) });
  await res.text();
  return Date.parse(res.headers.get('date') ?? '') - Date.now();
}

/** What one run showed, delivered first to `holder`, then to `other` while the job worked. */
interface Observed {
  /** The first delivery's answer, or why there was none. */
  readonly first: Delivery | Error;
  /** The job's first start (on `holder`), and our clock when we saw it. */
  readonly start: ExecutionEvent;
  readonly startSeenAt: number;
  /** The deliveries to `other` while the first was in flight, oldest first. */
  readonly retries: readonly Delivery[];
  /** One delivery to each instance once the first was answered. */
  readonly late: readonly Delivery[];
  /** The record, read every {@link READ_EVERY_MS} while the first was in flight. */
  readonly reads: readonly TimedRead[];
  /** Every execution event of the run, on either instance. */
  readonly executions: readonly ExecutionEvent[];
  readonly final: StoredRun | undefined;
}

/**
 * Delivers the run of `jobName` to `holder`; once its job started, delivers the same run to
 * `other` every {@link RETRY_EVERY_MS} and reads the record every {@link READ_EVERY_MS} until the
 * first delivery is answered; then delivers it once more to each.
 */
async function deliverWhileRunning(
  holder: FunctionProcess,
  other: FunctionProcess,
  jobName: string,
): Promise<Observed> {
  const headers = scheduled(jobName);
  let answered = false;
  const firstAnswer = deliver(holder.url, headers, {
    signal: AbortSignal.timeout(60_000),
  })
    .catch((err: unknown) =>
      err instanceof Error ? err : new Error(String(err)),
    )
    .finally(() => {
      answered = true;
    });
  const start = await waitFor(
    `job ${jobName} to start`,
    () =>
      holder
        .executions()
        .find((e) => e.event === 'start' && e.jobName === jobName),
    30_000,
  );
  const startSeenAt = Date.now();
  const retries: Delivery[] = [];
  const reads: TimedRead[] = [];
  const retrying = (async () => {
    while (!answered) {
      retries.push(await deliver(other.url, headers));
      await sleep(RETRY_EVERY_MS);
    }
  })();
  const reading = (async () => {
    while (!answered) {
      reads.push(await storedRunRead(holder, start.runId));
      await sleep(READ_EVERY_MS);
    }
  })();
  const first = await firstAnswer;
  await Promise.all([retrying, reading]);
  const late = [
    await deliver(other.url, headers),
    await deliver(holder.url, headers),
  ];
  return {
    first,
    start,
    startSeenAt,
    retries,
    late,
    reads,
    executions: holder.executions(start.runId),
    final: await storedRunOf(holder, start.runId),
  };
}

function answerOf(d: Delivery | Error): string {
  return d instanceof Error
    ? `${d.name}: ${d.message}`
    : `${d.status} ${d.body.outcome ?? '-'}`;
}

/** Consecutive equal answers as `answer ×n`, e.g. `['409 in_progress ×31', '200 duplicate ×1']`. */
function streaks(
  answers: readonly string[],
): { answer: string; count: number }[] {
  const out: { answer: string; count: number }[] = [];
  for (const answer of answers) {
    const last = out.at(-1);
    if (last?.answer === answer) {
      last.count++;
    } else {
      out.push({ answer, count: 1 });
    }
  }
  return out;
}

/**
 * Asserts what exactly once means for one observed run, and returns a line of figures: one start,
 * every retry 409 until completion and 200 duplicate after, the lease always live and at most one
 * lease ahead by the emulator's clock, and one extension per beat at most.
 */
function assertRanOnceUnderALiveLease(seen: Observed): string {
  const starts = seen.executions.filter((e) => e.event === 'start');
  const retryStreaks = streaks(seen.retries.map(answerOf));
  const held = seen.reads.filter((r) => r.run?.status === 'in_progress');
  const margins = held.map(
    (r) => (r.run?.leaseExpiresMs ?? Number.NaN) - r.readTimeMs,
  );
  const writes = [...new Set(held.map((r) => r.run?.updateTime ?? ''))].map(
    (t) => Date.parse(t),
  );
  const gaps = writes.slice(1).map((t, i) => t - (writes[i] ?? Number.NaN));
  const figures =
    `retries ${retryStreaks.map((s) => `${s.answer} ×${s.count}`).join(', ')}; ` +
    `${held.length} reads in progress, lease ahead of the emulator's clock by ` +
    `${Math.min(...margins)}..${Math.max(...margins)} ms; ${writes.length - 1} extensions seen, ` +
    `gaps ${Math.min(...gaps)}..${Math.max(...gaps)} ms`;

  assert.equal(answerOf(seen.first), '200 processed', figures);
  assert.deepEqual(
    starts.map((e) => e.attemptId),
    [seen.start.attemptId],
    `the job ran once, on the instance that claimed first (${figures})`,
  );
  // At least five, however slow each delivery is on a busy machine (ten or more on a quiet one).
  assert.ok(
    seen.retries.length >= 5,
    `retries kept coming while the job ran (${figures})`,
  );
  assert.ok(
    retryStreaks[0]?.answer === '409 in_progress' &&
      retryStreaks.slice(1).every((s) => s.answer === '200 duplicate'),
    `every retry answered 409 in_progress until the run completed, then 200 duplicate (${figures})`,
  );
  assert.deepEqual(seen.late.map(answerOf), ['200 duplicate', '200 duplicate']);
  // Read while the job ran, however slow the machine makes each read (a count alone is a speed):
  // at least once a lease over more than a lease and a beat, so a lease written lapsed, one more
  // than a lease long, or one the heartbeat let lapse is seen (a busy machine shortens the window:
  // the job's start is seen late).
  const readTimes = held.map((r) => r.readTimeMs);
  const readSpan = Math.max(...readTimes) - Math.min(...readTimes);
  const readGap = Math.max(
    ...readTimes.slice(1).map((t, i) => t - (readTimes[i] ?? t)),
  );
  assert.ok(
    held.length >= 5 && readSpan >= LEASE_MS + BEAT_MS && readGap <= LEASE_MS,
    `the record was read while the job ran, once a lease at least (${held.length} reads over ${readSpan} ms, at most ${readGap} ms apart; ${figures})`,
  );
  assert.ok(
    held.every((r) => r.run?.attemptId === seen.start.attemptId),
    'no other attempt ever held the run',
  );
  assert.ok(
    margins.every((m) => m > 0),
    `the lease never lapsed by the emulator's clock (${figures})`,
  );
  assert.ok(
    margins.every((m) => m <= LEASE_MS),
    `the lease never reached more than ${LEASE_MS} ms past the emulator's clock (${figures})`,
  );
  assert.ok(
    writes.length - 1 >= 2 && writes.length - 1 <= MAX_EXTENSIONS,
    `the heartbeat extended the lease 2 to ${MAX_EXTENSIONS} times (${figures})`,
  );
  assert.ok(
    gaps.every((g) => g >= MIN_EXTENSION_GAP_MS),
    `no two extensions came less than ${MIN_EXTENSION_GAP_MS} ms apart (${figures})`,
  );
  assert.equal(seen.final?.status, 'completed');
  assert.equal(seen.final?.attemptId, seen.start.attemptId);
  return figures;
}

describe('a clock off by ±90 s on one of two instances', {
  concurrency: true,
}, () => {
  before(requireFaketime);

  for (const skewS of [-SKEW_S, SKEW_S]) {
    const skew = `${skewS > 0 ? '+' : ''}${skewS}s`;
    const name = skewS > 0 ? `p${SKEW_S}` : `m${SKEW_S}`;
    // The three cases one after the other: six at once on a busy machine starve this process's
    // retries and reads, so they no longer show the lease while the job runs.
    describe(`the skewed instance’s clock ${skew}`, {
      concurrency: false,
    }, () => {
      const collection = freshCollection();
      const skewed = {
        collection,
        env: ENV,
        wrapper: faketimeWrapper(OUTER_S + skewS),
      };
      let cold: FunctionProcess;
      let serving: FunctionProcess;
      let correct: FunctionProcess;
      before(async () => {
        [cold, serving, correct] = await Promise.all([
          startFunction(skewed),
          startFunction(skewed),
          startFunction({ collection, env: ENV }),
        ]);
        await Promise.all([warmUp(serving), warmUp(correct)]);
        // This process's Firestore client makes its first call here, not while a job runs.
        await storedRunRead(correct, 'no-such-run');
        const offsets = await Promise.all(
          [cold, serving, correct].map(clockOffsetOf),
        );
        assert.ok(
          offsets.every(
            (o, i) =>
              Math.abs(o - (i < 2 ? skewS * 1000 : 0)) < CLOCK_TOLERANCE_MS,
          ),
          `the instances' clocks are off by ${offsets.join(', ')} ms (cold, serving, correct)`,
        );
      });
      after(() =>
        Promise.all([cold?.kill(), serving?.kill(), correct?.kill()]),
      );

      it('runs the job once when the skewed instance claims first, on its first Firestore call, and the correct one gets retries throughout', async (t) => {
        const jobName = `skew${name}_cold_sleep${JOB_MS}`;

        const seen = await deliverWhileRunning(cold, correct, jobName);

        t.diagnostic(assertRanOnceUnderALiveLease(seen));
        assert.ok(
          Math.abs(seen.start.at - seen.startSeenAt - skewS * 1000) <
            CLOCK_TOLERANCE_MS,
          `the job ran on the skewed clock (its start at ${seen.start.at - seen.startSeenAt} ms)`,
        );
      });

      it('runs the job once when the skewed instance, already serving, claims first and the correct one gets retries throughout', async (t) => {
        const jobName = `skew${name}_serving_sleep${JOB_MS}`;

        const seen = await deliverWhileRunning(serving, correct, jobName);

        t.diagnostic(assertRanOnceUnderALiveLease(seen));
        assert.ok(
          Math.abs(seen.start.at - seen.startSeenAt - skewS * 1000) <
            CLOCK_TOLERANCE_MS,
          `the job ran on the skewed clock (its start at ${seen.start.at - seen.startSeenAt} ms)`,
        );
      });

      it('runs the job once when the correct instance claims first and the skewed one gets retries throughout', async (t) => {
        const jobName = `skew${name}_correctfirst_sleep${JOB_MS}`;

        const seen = await deliverWhileRunning(correct, serving, jobName);

        t.diagnostic(assertRanOnceUnderALiveLease(seen));
        assert.ok(
          Math.abs(seen.start.at - seen.startSeenAt) < CLOCK_TOLERANCE_MS,
          'the job ran on the correct clock',
        );
      });
    });
  }
});
