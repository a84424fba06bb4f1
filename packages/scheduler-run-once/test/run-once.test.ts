/**
 * `runOnce`, the run lifecycle, on the real emulator: once per idempotency key, the abort signal's
 * reasons, the current lease, and the warnings when a job ignores its abort or loses its lease.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { AttemptAbortedError } from '../src/core/errors.ts';
import { type RunOnceOptions, runOnce } from '../src/core/run-once.ts';
import {
  captureLogs,
  firestore,
  grpcError,
  hookedFirestore,
  newLedger,
  sleep,
  storedRecord,
  until,
} from './helpers.ts';

/**
 * The lease, ms, of the tests that check what a lost or lapsed lease is blamed on: long enough that
 * a loaded machine's pause (a garbage collection, a starved process) of a few hundred ms between two
 * steps is not taken for the instance stalling, short enough that the lease lapses in a second.
 */
const CAUSE_TEST_LEASE_MS = 1_000;

/** The ledger {@link newLedger} gives. */
type Ledger = ReturnType<typeof newLedger>['ledger'];

/** Runs `run-1` with a job that keeps running until `thief` has claimed the run (a takeover). */
function runUntilTakenOver(
  ledger: Ledger,
  thief: Ledger,
  options: RunOnceOptions,
): ReturnType<typeof runOnce> {
  return runOnce(
    ledger,
    'run-1',
    async () => {
      await until(
        async () => (await thief.claim('run-1')).state === 'claimed',
        5_000,
      );
    },
    options,
  );
}

describe('runOnce', () => {
  it('runs 20 concurrent callers of one idempotency key once; the others see in_progress or duplicate', async () => {
    const { ledger } = newLedger();
    const { logger } = captureLogs();
    let executions = 0;
    const work = async () => {
      executions++;
      await sleep(100);
    };

    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        runOnce(ledger, 'payment-42', work, { logger }),
      ),
    );
    const later = await runOnce(ledger, 'payment-42', work, { logger });

    assert.equal(executions, 1);
    assert.equal(results.filter((r) => r.outcome === 'processed').length, 1);
    assert.ok(
      results.every((r) =>
        ['processed', 'in_progress', 'duplicate'].includes(r.outcome),
      ),
    );
    assert.equal(later.outcome, 'duplicate');
  });

  it('aborts the job signal with reason job_timeout past maxRunMs', async () => {
    const { ledger } = newLedger();
    const { logger } = captureLogs();

    const result = await runOnce(
      ledger,
      'run-1',
      async ({ signal }) => {
        await sleep(2000);
        signal.throwIfAborted();
      },
      { logger, maxRunMs: 200 },
    );

    assert.equal(result.outcome, 'failed');
    const error = result.outcome === 'failed' ? result.error : undefined;
    assert.ok(
      error instanceof AttemptAbortedError && error.reason === 'job_timeout',
    );
    assert.equal(
      (await ledger.documents.read('run-1')).record?.status,
      'failed',
      'the claim was released',
    );
  });

  it('warns when the job is still running after its signal was aborted', async () => {
    const { ledger } = newLedger();
    const { logger, lines } = captureLogs();

    const result = await runOnce(
      ledger,
      'run-1',
      async () => {
        await sleep(1_500); // ignores its signal
      },
      { logger, maxRunMs: 100, abortWarningMs: 200 },
    );

    const warning = lines().find((l) =>
      /still running .* after its signal was aborted/.test(String(l.message)),
    );
    assert.ok(warning, 'a warning names the job that ignores its abort');
    assert.equal(warning.abortReason, 'job_timeout');
    assert.equal(warning.severity, 'WARNING');
    assert.equal(result.outcome, 'processed');
  });

  it('says nothing when the job stops promptly on its aborted signal', async () => {
    const { ledger } = newLedger();
    const { logger, lines } = captureLogs();

    await runOnce(
      ledger,
      'run-1',
      async ({ signal }) => {
        await new Promise((_, reject) =>
          signal.addEventListener('abort', () => reject(signal.reason)),
        );
      },
      { logger, maxRunMs: 50, abortWarningMs: 100 },
    );
    await sleep(200);

    assert.equal(
      lines().filter((l) => /still running/.test(String(l.message))).length,
      0,
    );
  });

  it('names the job timeout as the cause when a job that ignored its abort lost its lease', async () => {
    const { ledger, collection } = newLedger({ leaseMs: 300 });
    const thief = newLedger({ collection, leaseMs: 60_000 }).ledger;
    const { logger, lines } = captureLogs();

    // The job ignores its abort at maxRunMs; the heartbeat stops, the lease lapses, the thief takes over.
    const result = await runUntilTakenOver(ledger, thief, {
      logger,
      maxRunMs: 50,
      abortWarningMs: 60_000,
    });

    assert.equal(result.outcome, 'processed');
    assert.equal(
      result.outcome === 'processed' && result.completion,
      'lease_lost',
    );
    assert.equal(
      result.outcome === 'processed' && result.leaseLoss,
      'job_timeout',
    );
    const warning = lines().find((l) => l.fence === 'completion');
    assert.match(
      String(warning?.message),
      /ran past JOB_TIMEOUT_SECONDS and ignored its aborted signal/,
    );
  });

  it('says a lease lapsed behind a timed-out job that kept running, not a paused or starved instance', async () => {
    const leaseMs = CAUSE_TEST_LEASE_MS;
    const { ledger } = newLedger({ leaseMs });
    const { logger, lines } = captureLogs();

    const result = await runOnce(
      ledger,
      'run-1',
      async () => {
        // Ignores its abort at maxRunMs for more than a lease, yielding to the event loop
        // throughout: the instance could beat, but the heartbeat stopped at the timeout.
        await sleep(3 * leaseMs);
      },
      { logger, maxRunMs: 50, abortWarningMs: 60_000 },
    );

    assert.equal(result.outcome, 'processed');
    const lapses = lines().filter((l) =>
      String(l.message).startsWith('lease lapsed:'),
    );
    assert.equal(lapses.length, 1, JSON.stringify(lapses));
    assert.doesNotMatch(String(lapses[0]?.message), /paused|starved/);
    assert.match(
      String(lapses[0]?.message),
      /ran past JOB_TIMEOUT_SECONDS and kept running/,
    );
    assert.equal(lapses[0]?.lapseCause, 'job_timeout');
  });

  it('names Firestore’s late answer, not a paused instance, when an extension sent in time was answered only after the lease lapsed', async () => {
    const leaseMs = CAUSE_TEST_LEASE_MS;
    const { ledger, collection } = newLedger({ leaseMs });
    const thief = newLedger({ collection, leaseMs: 60_000 }).ledger;
    const { logger, lines } = captureLogs();
    // Every extension is sent on time and lands only after the lease lapsed (Firestore slow).
    const extend = ledger.extend.bind(ledger);
    ledger.extend = async (claim) => {
      await sleep(3 * leaseMs);
      return extend(claim);
    };

    const result = await runUntilTakenOver(ledger, thief, {
      logger,
      abortWarningMs: 60_000,
    });

    assert.equal(
      result.outcome === 'processed' && result.leaseLoss,
      'extension_unanswered',
    );
    const lapses = lines().filter((l) =>
      String(l.message).startsWith('lease lapsed:'),
    );
    for (const lapse of lapses) {
      assert.doesNotMatch(String(lapse.message), /paused or starved/);
    }
  });

  it('names Firestore’s late answer, not a paused instance, when a release sent in time was answered only after the lease lapsed', async () => {
    // --seed=391860920 (simulator): the job threw before its first beat; its release, sent at
    // once, was answered after the lease lapsed and another attempt took the run over. Before,
    // no renewal had been sent, so the loss read "this instance was paused or starved of CPU".
    const leaseMs = CAUSE_TEST_LEASE_MS;
    const { ledger, collection } = newLedger({ leaseMs });
    const thief = newLedger({ collection, leaseMs: 60_000 }).ledger;
    const { logger, lines } = captureLogs();
    const release = ledger.release.bind(ledger);
    ledger.release = async (...args) => {
      await until(
        async () => (await thief.claim('run-1')).state === 'claimed',
        5_000,
      );
      return release(...args);
    };

    const result = await runOnce(
      ledger,
      'run-1',
      async () => {
        throw new Error('the job threw at once');
      },
      { logger, abortWarningMs: 60_000 },
    );

    assert.equal(result.outcome, 'failed');
    assert.equal(
      result.outcome === 'failed' && result.leaseLoss,
      'extension_unanswered',
    );
    const warning = lines().find((l) => l.fence === 'release');
    assert.match(String(warning?.message), /Firestore slow/);
    assert.doesNotMatch(String(warning?.message), /paused or starved/);
  });

  it('names a stall a stall after a refused note: a note the ledger refuses sends no renewal', async () => {
    const leaseMs = 300;
    const { ledger } = newLedger({ leaseMs });
    const { logger, lines } = captureLogs();

    await runOnce(
      ledger,
      'run-1',
      async (attempt) => {
        await attempt.note('started', true);
        // Refused before any write (a name the record cannot hold); a careful job goes on.
        await attempt.note('', 1).catch(() => undefined);
        // Starved of CPU for more than a lease: no beat can run, none is sent.
        const until = performance.now() + leaseMs + 150;
        while (performance.now() < until) {}
        await sleep(leaseMs / 2);
      },
      { logger, abortWarningMs: 60_000 },
    );

    const lapses = lines().filter(
      (l) => l.lapseCause !== undefined || l.leaseLoss !== undefined,
    );
    assert.ok(lapses.length > 0, JSON.stringify(lines()));
    for (const lapse of lapses) {
      assert.equal(lapse.lapseCause ?? lapse.leaseLoss, 'stalled');
      assert.doesNotMatch(String(lapse.message), /Firestore slow/);
    }
  });

  it('gives the work a current lease end, moved on by the heartbeat', async () => {
    const { ledger } = newLedger({ leaseMs: 300 });
    const { logger } = captureLogs();
    const seen: number[] = [];

    await runOnce(
      ledger,
      'run-1',
      async (attempt) => {
        seen.push(attempt.leaseExpires.getTime());
        await until(
          () => attempt.leaseExpires.getTime() > (seen[0] ?? 0),
          3_000,
        );
        seen.push(attempt.leaseExpires.getTime());
      },
      { logger },
    );

    assert.equal(seen.length, 2);
    assert.ok((seen[1] ?? 0) > (seen[0] ?? 0), 'the lease end moved on');
  });

  it('notes a value in the run record before the run completes, fenced, and keeps it after', async () => {
    const { ledger, collection } = newLedger();
    const { logger } = captureLogs();
    let whileRunning: FirebaseFirestore.DocumentData | undefined;

    const result = await runOnce(
      ledger,
      'run-1',
      async ({ note }) => {
        await note('launch', { name: 'executions/x7k2p', adopted: false });
        whileRunning = await storedRecord(collection, 'run-1');
      },
      { logger },
    );

    assert.equal(result.outcome, 'processed');
    assert.equal(
      result.outcome === 'processed' && result.completion,
      'recorded',
    );
    assert.equal(whileRunning?.status, 'in_progress');
    assert.deepEqual(whileRunning?.notes, {
      launch: { name: 'executions/x7k2p', adopted: false },
    });
    assert.deepEqual(
      (await storedRecord(collection, 'run-1')).notes,
      whileRunning?.notes,
    );
  });

  it("gives a retry the first attempt's claim time as stored, and the first attempt its own claim's", async () => {
    const { ledger, collection } = newLedger();
    const { logger } = captureLogs();
    const seen: Date[] = [];
    const work = async ({ firstClaimedAt }: { firstClaimedAt: Date }) => {
      seen.push(firstClaimedAt);
      if (seen.length === 1) {
        throw new Error('the first attempt fails');
      }
    };

    await runOnce(ledger, 'run-1', work, { logger });
    await sleep(20);
    const retry = await runOnce(ledger, 'run-1', work, { logger });

    assert.equal(retry.outcome, 'processed');
    const stored = (
      await storedRecord(collection, 'run-1')
    ).first_claimed_at.toDate();
    assert.equal(seen[1]?.getTime(), stored.getTime());
    // The create's commit time; the emulator stamps the stored value on receipt, a little earlier.
    assert.ok((seen[0]?.getTime() ?? 0) >= stored.getTime());
  });

  it('refuses a note the record cannot hold, saying what is wrong, and writes nothing', async () => {
    const { ledger, collection } = newLedger();
    const { logger } = captureLogs();
    const refusals: string[] = [];

    await runOnce(
      ledger,
      'run-1',
      async ({ note }) => {
        for (const [name, value] of [
          ['bad name', 1],
          ['nested', { deep: { no: true } }],
          ['long', 'x'.repeat(1501)],
        ] as const) {
          await note(name, value as never).catch((err: Error) =>
            refusals.push(err.message),
          );
        }
      },
      { logger },
    );

    assert.equal(refusals.length, 3);
    assert.match(refusals[0] ?? '', /note name "bad name" must be a letter/);
    assert.match(
      refusals[1] ?? '',
      /field deep of note nested: a value must be a string/,
    );
    assert.match(refusals[2] ?? '', /at most 1500 characters/);
    assert.equal((await storedRecord(collection, 'run-1')).notes, undefined);
  });

  it('rejects a note once another attempt took the run over, and the job is aborted', async () => {
    const { ledger, collection } = newLedger();
    const { logger } = captureLogs();
    let noted: unknown;

    const result = await runOnce(
      ledger,
      'run-1',
      async ({ note, signal }) => {
        await firestore
          .collection(collection)
          .doc('run-1')
          .update({ attempt_id: 'thief' });
        noted = await note('launch', 'x').catch((err: unknown) => err);
        signal.throwIfAborted();
      },
      { logger },
    );

    assert.ok(
      noted instanceof AttemptAbortedError && noted.reason === 'lease_lost',
    );
    assert.equal(result.outcome, 'failed');
    assert.equal((await storedRecord(collection, 'run-1')).notes, undefined);
  });
  it('refuses a note at once, with no write, once the attempt knows another attempt took the run over', async () => {
    // A job that goes on past its signal (the simulator's stubborn jobs, seed 412, path 133,
    // --faults) noted again after its takeover: a fenced write that could never land.
    const { ledger, collection } = newLedger();
    const { logger } = captureLogs();
    let notesSent = 0;
    const counting = new Proxy(ledger, {
      get(target, key) {
        const value = Reflect.get(target, key);
        if (key === 'note' && typeof value === 'function') {
          return (...args: unknown[]) => {
            notesSent++;
            return value.apply(target, args);
          };
        }
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const refusals: unknown[] = [];

    await runOnce(
      counting,
      'run-1',
      async ({ note }) => {
        await firestore
          .collection(collection)
          .doc('run-1')
          .update({ attempt_id: 'thief' });
        refusals.push(await note('launch', 'x').catch((err: unknown) => err));
        refusals.push(await note('again', 'y').catch((err: unknown) => err));
      },
      { logger },
    );

    assert.equal(notesSent, 1, 'only the first note was sent');
    for (const refused of refusals) {
      assert.ok(
        refused instanceof AttemptAbortedError &&
          refused.reason === 'lease_lost',
      );
    }
  });
  it('asks finalFailure, with the failure as stored, before the release is written: a release that never answers was still reported', async () => {
    const { ledger } = newLedger();
    const { logger } = captureLogs();
    const asked: string[] = [];
    let releases = 0;
    const hanging = new Proxy(ledger, {
      get(target, key) {
        if (key === 'release') {
          return () => {
            releases++;
            return new Promise(() => {});
          };
        }
        const value = Reflect.get(target, key);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });

    void runOnce(
      hanging,
      `run-${randomUUID()}`,
      () => {
        throw new Error('the export failed');
      },
      {
        logger,
        finalFailure: async (_attempt, failure) => {
          asked.push(`${failure} (releases so far: ${releases})`);
          return 'reporter-1';
        },
      },
    );
    await until(() => releases === 1);

    assert.deepEqual(asked, ['the export failed (releases so far: 0)']);
  });
  it('never asks finalFailure once its lease may have lapsed: another attempt may hold the run, so the check reports it', async () => {
    const leaseMs = 300;
    const { ledger } = newLedger({ leaseMs });
    const { logger } = captureLogs();
    const asked: string[] = [];

    const result = await runOnce(
      ledger,
      `run-${randomUUID()}`,
      () => {
        // The instance stalls past its lease (no timer runs), then the job fails.
        Atomics.wait(
          new Int32Array(new SharedArrayBuffer(4)),
          0,
          0,
          2 * leaseMs,
        );
        throw new Error('the export failed');
      },
      {
        logger,
        finalFailure: async (_attempt, failure) => {
          asked.push(failure);
          return 'reporter-1';
        },
      },
    );

    assert.equal(result.outcome, 'failed');
    assert.equal(result.outcome === 'failed' && result.reported, false);
    assert.deepEqual(asked, []);
  });
  it('aborts no signal of a job that threw while its release is still being written: neither a SIGTERM nor its timeout', async () => {
    const { ledger } = newLedger();
    const { logger } = captureLogs();
    let releaseAnswered: () => void = () => {};
    let releases = 0;
    const slowRelease = new Proxy(ledger, {
      get(target, key) {
        if (key === 'release') {
          return async (...args: Parameters<Ledger['release']>) => {
            releases++;
            await new Promise<void>((resolve) => {
              releaseAnswered = resolve;
            });
            return target.release(...args);
          };
        }
        const value = Reflect.get(target, key);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const shutdown = new AbortController();
    let seen: AbortSignal | undefined;

    const result = runOnce(
      slowRelease,
      `run-${randomUUID()}`,
      ({ signal }) => {
        seen = signal;
        throw new Error('the export failed');
      },
      { logger, maxRunMs: 300, shutdown: shutdown.signal },
    );
    await until(() => releases === 1);
    shutdown.abort();
    await sleep(500);
    releaseAnswered();

    assert.equal((await result).outcome, 'failed');
    assert.equal(
      seen?.aborted,
      false,
      'the signal of a job that had ended stays quiet',
    );
  });

  it('widens a claim learnt late (its own landed write found by a read) before the claim’s short lease lapses', async () => {
    // Firestore answers slowly, each call under the timeout: the takeover lands, but its answer comes
    // late as the client's retry's "precondition failed"; the next round's create and read are slow
    // too, and the read finds the takeover is ours. The claim's lease began at the takeover's commit,
    // three slow answers before the job starts.
    // Each slow answer still comes 1.4 s inside the timeout, and three of them (10.8 s) outlast
    // two thirds of the claim's lease (3 timeouts): a widening left to the first beat would be late.
    const timeoutMs = 5_000;
    const slowMs = 3_600;
    const slowly = async <T>(answer: () => Promise<T>) => {
      await sleep(slowMs);
      return answer();
    };
    const calls = { create: 0, get: 0, update: 0 };
    const db = hookedFirestore({
      create: (real, args) => {
        calls.create++;
        const create = () =>
          real.create(...(args as [FirebaseFirestore.DocumentData]));
        return calls.create === 1 ? create() : slowly(create);
      },
      get: (real) => {
        calls.get++;
        return calls.get === 1 ? real.get() : slowly(() => real.get());
      },
      update: async (real, args) => {
        calls.update++;
        const update = real.update as (...a: unknown[]) => Promise<unknown>;
        const landed = await update.apply(real, args);
        if (calls.update > 1) {
          return landed;
        }
        return slowly(() =>
          Promise.reject(
            grpcError(9, 'FAILED_PRECONDITION: the retry of a landed write'),
          ),
        );
      },
    });
    const { ledger, collection } = newLedger(
      { leaseMs: 300_000, timeoutMs },
      db,
    );
    const other = newLedger({ collection, leaseMs: 300_000, timeoutMs }).ledger;
    const failed = await other.claim('run-1');
    assert.equal(failed.state, 'claimed');
    assert.equal(
      await other.release(failed.claim, 'the first attempt failed'),
      'recorded',
    );
    const { logger } = captureLogs();
    let running = false;
    let stop = () => {};
    const stopped = new Promise<void>((resolve) => {
      stop = resolve;
    });

    const outcome = runOnce(
      ledger,
      'run-1',
      async ({ signal }) => {
        running = true;
        await Promise.race([
          stopped,
          new Promise((resolve) => signal.addEventListener('abort', resolve)),
        ]);
        running = false;
      },
      { logger },
    );
    await until(() => running, 20_000);
    const taken: string[] = [];
    // Past the claim's lease counted from its commit (three timeouts) and its old first beat.
    const watchUntil = Date.now() + timeoutMs * 2;
    while (Date.now() < watchUntil && running) {
      const claimed = await other.claim('run-1');
      if (claimed.state === 'claimed') {
        taken.push(claimed.claim.attemptId);
      }
      await sleep(100);
    }
    const stillRunning = running;
    stop();
    await outcome;

    assert.deepEqual(
      taken,
      [],
      'another instance took the run over while its job ran',
    );
    assert.equal(stillRunning, true, 'the job was aborted: its lease was lost');
    assert.equal((await storedRecord(collection, 'run-1')).status, 'completed');
  });
});
