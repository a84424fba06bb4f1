/**
 * The lease heartbeat (`AttemptScope` in `run-once.ts`) on the real emulator: it keeps long jobs
 * exclusive and aborts the job's signal when the lease is lost.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  AttemptAbortedError,
  LedgerUnavailableError,
} from '../src/core/errors.ts';
import { runOnce } from '../src/core/run-once.ts';
import {
  captureLogs,
  countingJob,
  documents,
  firestore,
  newLedger,
  schedulerHeaders,
  serve,
  sleep,
  storedRecord,
  until,
} from './helpers.ts';

/**
 * How early a Node timer may fire by `performance.now()`: libuv counts a timer from the loop's time
 * cached at the start of its tick, in whole milliseconds (`uv_now`), so a 600 ms timer has been
 * seen to fire 599.8 ms after it was set. The lease is not over sooner than that.
 */
const TIMER_EARLY_MS = 1;

describe('lease heartbeat', () => {
  it('keeps a job longer than LEASE_SECONDS exclusive: duplicates on another instance get 409 throughout, one execution', async () => {
    const { job, calls } = countingJob({ delayMs: 4000 });
    const env = { LEASE_SECONDS: '1' };
    const instanceA = serve(job, { env });
    const { collection } = instanceA;
    const instanceB = serve(job, {
      env,
      collection,
      ledger: newLedger({ collection, leaseMs: 1000, retentionMs: 60_000 })
        .ledger,
    });

    const first = instanceA.request
      .post('/')
      .set(schedulerHeaders())
      .then((r) => r);
    await until(async () => (await documents(collection)).size === 1);
    const claimedAt = Date.now();
    const duplicates = [];
    let lastSentAfterMs = 0;
    while (Date.now() - claimedAt < 3000) {
      await sleep(250);
      lastSentAfterMs = Date.now() - claimedAt;
      duplicates.push(
        await instanceB.request.post('/').set(schedulerHeaders()),
      );
    }
    const done = await first;

    // Throughout the job: past two whole leases, however slow the machine makes each request.
    assert.ok(
      duplicates.length >= 3 && lastSentAfterMs >= 2000,
      `${duplicates.length} duplicates, the last ${lastSentAfterMs} ms after the claim`,
    );
    assert.deepEqual(
      duplicates.map((r) => r.status),
      Array(duplicates.length).fill(409),
    );
    assert.equal(done.status, 200);
    assert.equal(done.body.outcome, 'processed');
    assert.equal(calls.length, 1);
    assert.equal(
      (await storedRecord(collection, done.body.runId)).status,
      'completed',
    );
  });

  it('aborts the job signal with reason lease_lost when another attempt steals the lease', async () => {
    const { ledger, collection } = newLedger({ leaseMs: 600 });
    const { logger } = captureLogs();
    let reason: unknown;

    const outcome = runOnce(
      ledger,
      'run-1',
      async ({ signal }) => {
        await new Promise<void>((_, reject) => {
          signal.addEventListener('abort', () => {
            reason = signal.reason;
            reject(signal.reason);
          });
        });
      },
      { logger },
    );
    await until(async () => (await documents(collection)).size === 1);
    await firestore
      .collection(collection)
      .doc('run-1')
      .update({ attempt_id: 'thief' });
    const result = await outcome;

    assert.ok(reason instanceof AttemptAbortedError);
    assert.equal(reason.reason, 'lease_lost');
    assert.equal(result.outcome, 'failed');
    assert.equal(result.outcome === 'failed' && result.release, 'lease_lost');
    assert.equal((await storedRecord(collection, 'run-1')).attempt_id, 'thief');
  });
  it('aborts the job and logs the lapse once its lease ends with no extension answered, not before', async () => {
    const leaseMs = 600;
    const { ledger } = newLedger({ leaseMs });
    const logs = captureLogs();
    // Every extension hangs past the lease, then fails as Firestore's timeout would.
    const unanswered = new Proxy(ledger, {
      get(target, key) {
        if (key === 'extend') {
          return () =>
            sleep(2 * leaseMs).then(() => {
              throw new LedgerUnavailableError(
                'Firestore did not answer the lease extension',
              );
            });
        }
        const value = Reflect.get(target, key);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const startedAt = performance.now();
    let abortedAfterMs: number | undefined;
    let reason: unknown;

    const result = await runOnce(
      unanswered,
      'run-1',
      async ({ signal }) => {
        await new Promise<void>((_, reject) => {
          const giveUp = setTimeout(
            () => reject(new Error('never aborted')),
            10 * leaseMs,
          );
          signal.addEventListener('abort', () => {
            clearTimeout(giveUp);
            abortedAfterMs = performance.now() - startedAt;
            reason = signal.reason;
            reject(signal.reason);
          });
        });
      },
      { logger: logs.logger },
    );

    assert.ok(
      reason instanceof AttemptAbortedError,
      `aborted by ${String(reason)}`,
    );
    assert.equal(reason.reason, 'lease_lost');
    assert.ok(
      abortedAfterMs !== undefined &&
        abortedAfterMs >= leaseMs - TIMER_EARLY_MS,
      `${abortedAfterMs} ms`,
    );
    const lapses = logs
      .lines()
      .filter((l) => String(l.message).startsWith('lease lapsed:'));
    assert.equal(lapses.length, 1);
    assert.match(
      String(lapses[0]?.message),
      /no extension was confirmed within the lease/,
    );
    assert.equal(result.outcome, 'failed');
  });
  it('warns that the lease lapsed as soon as a starved instance runs again, before its completion is written', async () => {
    const { ledger } = newLedger({ leaseMs: 300 });
    const logs = captureLogs();
    const lapsed = () =>
      logs.lines().filter((l) => String(l.message).startsWith('lease lapsed:'))
        .length;
    let warnedBeforeCompletion: number | undefined;
    const watched = new Proxy(ledger, {
      get(target, key) {
        const value = Reflect.get(target, key);
        if (key === 'complete') {
          warnedBeforeCompletion = lapsed();
        }
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });

    const result = await runOnce(
      watched,
      'run-1',
      () => {
        // The CPU starved for more than a lease: no beat could run.
        const end = performance.now() + 450;
        while (performance.now() < end) {}
      },
      { logger: logs.logger },
    );

    assert.equal(result.outcome, 'processed');
    assert.equal(warnedBeforeCompletion, 1);
    assert.equal(lapsed(), 1, 'one warning');
  });
});
