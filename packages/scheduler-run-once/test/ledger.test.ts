/**
 * The run ledger against the real Firestore emulator: the guide's state machine, fencing, and the
 * races and faults between its steps.
 */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Timestamp } from '@google-cloud/firestore';
import {
  DatabaseNotFoundError,
  LedgerUnavailableError,
  RunOnceError,
} from '../src/core/errors.ts';
import {
  type Claim,
  type ClaimResult,
  reportFailure,
} from '../src/core/ledger.ts';
import type { GuardedWrite, RunDocuments } from '../src/core/run-documents.ts';
import {
  countingFirestore,
  firestore,
  grpcError,
  hookedFirestore,
  loseCommitAnswers,
  newLedger,
  PAST_NOON,
  storedRecord,
} from './helpers.ts';

function claimOf(result: ClaimResult): Claim {
  assert.equal(
    result.state,
    'claimed',
    `expected a claim, got ${result.state}`,
  );
  return (result as Extract<ClaimResult, { state: 'claimed' }>).claim;
}

/**
 * A Firestore whose first `update()` lands but whose answer is lost (UNAVAILABLE after the write),
 * after `meanwhile` runs; `updates()` counts the updates sent.
 */
function loseFirstUpdateAnswer(
  meanwhile: () => Promise<void> = async () => {},
) {
  let updates = 0;
  const db = hookedFirestore({
    update: async (real, args) => {
      updates++;
      const written = await real.update(
        ...(args as [
          FirebaseFirestore.UpdateData<FirebaseFirestore.DocumentData>,
        ]),
      );
      if (updates === 1) {
        await meanwhile();
        throw grpcError(14, 'connection reset after the write');
      }
      return written;
    },
  });
  return { db, updates: () => updates };
}

async function expireLease(collection: string, runId: string): Promise<void> {
  await firestore
    .collection(collection)
    .doc(runId)
    .update({ leased_at: Timestamp.fromMillis(Date.now() - 3_600_000) });
}

describe('RunLedger', () => {
  it('a first claim writes an in_progress record with the guide fields', async () => {
    const { ledger, collection } = newLedger({
      leaseMs: 300_000,
      retentionMs: 86_400_000,
    });
    const before = Date.now();

    const claim = claimOf(
      await ledger.claim('run-1', {
        jobName: 'nightly',
        scheduleTime: PAST_NOON.replace('Z', '.123456789Z'),
      }),
    );

    const record = await storedRecord(collection, 'run-1');
    assert.equal(record.status, 'in_progress');
    assert.equal(record.attempt_id, claim.attemptId);
    assert.equal(record.job_name, 'nightly');
    // Firestore keeps microseconds.
    assert.equal((record.schedule_time as Timestamp).nanoseconds, 123_456_000);
    // A claim's short lease: three Firestore timeouts (10 s), until the first extension widens it.
    assert.equal(record.lease_ms, 30_000);
    assert.ok(record.leased_at instanceof Timestamp);
    // leased_at is Firestore's time of the write: at or before its commit time (the fencing token),
    // within the write's own latency (the emulator stamps it on receipt).
    const lag =
      claim.fencingToken.toMillis() -
      (record.leased_at as Timestamp).toMillis();
    assert.ok(
      lag >= 0 && lag < 2_000,
      `leased_at is ${lag} ms before the commit`,
    );
    assert.equal(
      claim.leaseExpires.getTime(),
      claim.fencingToken.toMillis() + 30_000,
    );
    const expireAt = (record.expire_at as Timestamp).toMillis();
    assert.ok(expireAt >= before + 86_399_000, `expire_at ${expireAt}`);
    assert.ok(record.claimed_at instanceof Timestamp);
    assert.equal(claim.takeover, false);
  });

  it('refuses, before any Firestore call, a run id Firestore cannot take as a document id, naming the rule', async () => {
    const { db, calls } = countingFirestore();
    const { ledger } = newLedger({}, db);

    for (const [runId, rule] of [
      ['a/b', /'\/'/],
      ['', /empty/],
      ['..', /empty, \. or \.\./],
      ['__reserved__', /reserved/],
      ['x'.repeat(1501), /1500 bytes/],
    ] as const) {
      await assert.rejects(ledger.claim(runId), (err: unknown) => {
        assert.ok(
          err instanceof RunOnceError &&
            !(err instanceof LedgerUnavailableError),
        );
        assert.match(err.message, rule);
        return true;
      });
    }
    assert.deepEqual(calls, { create: 0, get: 0, update: 0, delete: 0 });
  });

  it('a claim from another instance while the lease is live reports in_progress with the holder', async () => {
    const { ledger, collection } = newLedger();
    const other = newLedger({ collection }).ledger;
    const first = claimOf(await ledger.claim('run-1'));

    const second = await other.claim('run-1');

    assert.equal(second.state, 'in_progress');
    assert.equal(
      second.state === 'in_progress' && second.holder?.attemptId,
      first.attemptId,
    );
  });

  it('a claim on the holding instance reports in_progress with the holder, without Firestore', async () => {
    const { ledger } = newLedger();
    const first = claimOf(await ledger.claim('run-1'));

    const second = await ledger.claim('run-1');

    assert.equal(second.state, 'in_progress');
    assert.equal(
      second.state === 'in_progress' && second.holder?.attemptId,
      first.attemptId,
    );
  });

  it('a claim after completion reports completed, with completed_at set', async () => {
    const { ledger } = newLedger();
    const claim = claimOf(await ledger.claim('run-1'));
    assert.equal(await ledger.complete(claim), 'recorded');

    const again = await ledger.claim('run-1');

    assert.equal(again.state, 'completed');
    assert.ok(
      again.state === 'completed' && again.record.completedAt instanceof Date,
    );
  });

  it('a completed record past its expire_at (TTL not yet run) is still a duplicate', async () => {
    const { ledger, collection } = newLedger();
    const claim = claimOf(await ledger.claim('run-1'));
    await ledger.complete(claim);
    await firestore
      .collection(collection)
      .doc('run-1')
      .update({
        expire_at: Timestamp.fromMillis(Date.now() - 86_400_000),
        leased_at: Timestamp.fromMillis(0),
      });

    const again = await ledger.claim('run-1');

    assert.equal(again.state, 'completed');
  });

  it('a released run keeps its failure and can be claimed again at once by a new attempt', async () => {
    const { ledger, collection } = newLedger();
    const first = claimOf(
      await ledger.claim('run-1', { scheduleTime: PAST_NOON }),
    );
    assert.equal(
      await ledger.release(first, `billing answered 503 ${'x'.repeat(400)}`),
      'recorded',
    );
    const failed = await storedRecord(collection, 'run-1');

    const second = claimOf(await ledger.claim('run-1'));

    assert.equal(failed.status, 'failed');
    assert.equal(failed.attempt_id, first.attemptId);
    assert.equal(failed.attempts, 1);
    assert.ok(failed.failed_at instanceof Timestamp);
    assert.equal(
      (failed.last_error as string).length,
      300,
      'cut to 300 characters',
    );
    assert.match(failed.last_error as string, /^billing answered 503 x/);
    assert.notEqual(second.attemptId, first.attemptId);
    assert.equal(second.takeover, true);
    const retried = await storedRecord(collection, 'run-1');
    assert.equal(retried.status, 'in_progress');
    assert.equal(retried.attempts, 2);
    assert.equal(
      (retried.first_claimed_at as Timestamp).toMillis(),
      (failed.first_claimed_at as Timestamp).toMillis(),
      'the first claim time is kept',
    );
  });

  it('a retry after a failure costs three calls: create, read, fenced takeover', async () => {
    const { db, calls } = countingFirestore();
    const { ledger } = newLedger({}, db);
    await ledger.release(claimOf(await ledger.claim('run-1')), 'failed once');
    Object.assign(calls, { create: 0, get: 0, update: 0, delete: 0 });

    claimOf(await ledger.claim('run-1'));

    assert.deepEqual(calls, { create: 1, get: 1, update: 1, delete: 0 });
  });

  it('an expired lease is taken over by a new attempt, by Firestore time', async () => {
    const { ledger, collection } = newLedger();
    const first = claimOf(await ledger.claim('run-1'));
    await expireLease(collection, 'run-1');

    const second = claimOf(
      await newLedger({ collection }).ledger.claim('run-1'),
    );

    assert.equal(second.takeover, true);
    assert.notEqual(second.attemptId, first.attemptId);
    const record = await storedRecord(collection, 'run-1');
    assert.equal(record.attempt_id, second.attemptId);
    assert.ok(
      (record.leased_at as Timestamp).toMillis() + (record.lease_ms as number) >
        Date.now() + 20_000,
      'the takeover holds a claim’s lease of three Firestore timeouts (30 s)',
    );
  });

  it('the first extension widens a claim’s short lease to the full lease', async () => {
    const { ledger, collection } = newLedger({
      leaseMs: 300_000,
      timeoutMs: 2_000,
    });
    const claim = claimOf(await ledger.claim('run-1'));
    assert.equal(claim.leaseMs, 6_000, 'three Firestore timeouts');

    const extended = await ledger.extend(claim);

    assert.notEqual(extended, 'lease_lost');
    assert.equal((extended as Claim).leaseMs, 300_000);
    const record = await storedRecord(collection, 'run-1');
    assert.equal(record.lease_ms, 300_000);
    const leasedAt = (record.leased_at as Timestamp).toMillis();
    assert.equal(
      (extended as Claim).leaseExpires.getTime() - 300_000 >= leasedAt - 2_000,
      true,
    );
  });

  describe('a claim or release whose write landed but was never answered', () => {
    /**
     * The emulator client, except that `method`'s first calls meet `faults` in turn: `unanswered`
     * lands, then never answers; `unavailable` fails without reaching Firestore (gRPC 14).
     */
    function faultyWrites(
      method: 'create' | 'update',
      faults: ('unanswered' | 'unavailable')[],
    ) {
      return hookedFirestore({
        [method]: async (
          real: FirebaseFirestore.DocumentReference,
          args: unknown[],
        ) => {
          const fault = faults.shift();
          if (fault === 'unavailable') {
            throw grpcError(14, 'UNAVAILABLE: injected');
          }
          const write = real[method] as (...a: unknown[]) => Promise<unknown>;
          const landed = await write.apply(real, args);
          return fault === 'unanswered' ? new Promise(() => {}) : landed;
        },
      });
    }

    it('this instance’s next claim takes the run over at once; another instance’s waits for the short lease', async () => {
      const db = faultyWrites('create', ['unanswered']);
      const { ledger, collection } = newLedger(
        { leaseMs: 300_000, timeoutMs: 500 },
        db,
      );
      const other = newLedger({
        collection,
        leaseMs: 300_000,
        timeoutMs: 500,
      }).ledger;

      await assert.rejects(ledger.claim('run-1'), LedgerUnavailableError);
      const stranded = await storedRecord(collection, 'run-1');
      const elsewhere = await other.claim('run-1');
      const again = claimOf(await ledger.claim('run-1'));

      assert.equal(
        stranded.status,
        'in_progress',
        'the unanswered claim landed',
      );
      assert.equal(
        stranded.lease_ms,
        1_500,
        'under a lease of three timeouts, not 300 s',
      );
      assert.equal(
        elsewhere.state,
        'in_progress',
        'another instance cannot tell it was abandoned',
      );
      assert.equal(again.takeover, true);
      assert.notEqual(again.attemptId, stranded.attempt_id);
      assert.equal(
        (await storedRecord(collection, 'run-1')).attempt_id,
        again.attemptId,
      );
      assert.equal(await ledger.complete(again), 'recorded');
    });

    it('another instance takes the run over once the claim’s short lease lapsed', async () => {
      const db = faultyWrites('create', ['unanswered']);
      const { ledger, collection } = newLedger(
        { leaseMs: 300_000, timeoutMs: 300 },
        db,
      );
      const other = newLedger({
        collection,
        leaseMs: 300_000,
        timeoutMs: 300,
      }).ledger;

      await assert.rejects(ledger.claim('run-1'), LedgerUnavailableError);
      const lapsesAt = Date.now() + 900;
      await new Promise((resolve) =>
        setTimeout(resolve, lapsesAt - Date.now() + 200),
      );
      const taken = claimOf(await other.claim('run-1'));

      assert.equal(taken.takeover, true);
    });

    it('after a completion never recorded, this instance’s next claim records it and answers completed: the job ran', async () => {
      const db = faultyWrites('update', [
        'unavailable',
        'unavailable',
        'unavailable',
      ]);
      // The faults answer at once: no short timeout needed, and a loaded machine's claim may take
      // more than a few hundred ms.
      const { ledger, collection } = newLedger(
        { leaseMs: 300_000, timeoutMs: 5_000 },
        db,
      );
      const claim = claimOf(await ledger.claim('run-1'));

      await assert.rejects(ledger.complete(claim), LedgerUnavailableError);
      const again = await ledger.claim('run-1');

      assert.equal(
        again.state,
        'completed',
        'a run whose job ran is not run again',
      );
      const stored = await storedRecord(collection, 'run-1');
      assert.equal(stored.status, 'completed');
      assert.equal(stored.attempt_id, claim.attemptId);
    });

    it('while a completion is being written, this instance answers another claim of the run in_progress', async () => {
      let finishWrite: () => void = () => {};
      const db = hookedFirestore({
        update: async (
          real: FirebaseFirestore.DocumentReference,
          args: unknown[],
        ) => {
          await new Promise<void>((resolve) => {
            finishWrite = resolve;
          });
          const write = real.update as (...a: unknown[]) => Promise<unknown>;
          return write.apply(real, args);
        },
      });
      const { ledger } = newLedger({ leaseMs: 300_000, timeoutMs: 5_000 }, db);
      const claim = claimOf(await ledger.claim('run-1'));

      const completing = ledger.complete(claim);
      const meanwhile = await ledger.claim('run-1');
      finishWrite();

      assert.equal(meanwhile.state, 'in_progress');
      assert.equal(await completing, 'recorded');
      assert.equal((await ledger.claim('run-1')).state, 'completed');
    });

    it('after a release never answered, this instance’s next claim takes the run over at once', async () => {
      const db = faultyWrites('update', [
        'unanswered',
        'unavailable',
        'unavailable',
      ]);
      const { ledger, collection } = newLedger(
        { leaseMs: 300_000, timeoutMs: 300 },
        db,
      );
      const claim = claimOf(await ledger.claim('run-1'));

      await assert.rejects(
        ledger.release(claim, 'the job failed'),
        LedgerUnavailableError,
      );
      const again = await ledger.claim('run-1');

      assert.equal(again.state, 'claimed');
      assert.equal(
        (await storedRecord(collection, 'run-1')).status,
        'in_progress',
      );
    });
  });

  it('a zombie attempt can neither complete nor release a run another attempt took over', async () => {
    const { ledger, collection } = newLedger();
    const other = newLedger({ collection }).ledger;
    const zombie = claimOf(await ledger.claim('run-1'));
    await expireLease(collection, 'run-1');
    const current = claimOf(await other.claim('run-1'));
    const ref = firestore.collection(collection).doc('run-1');
    const before = (await ref.get()).updateTime;

    assert.equal(await ledger.complete(zombie), 'lease_lost');
    assert.equal(await ledger.release(zombie), 'lease_lost');

    const after = await ref.get();
    assert.ok(
      after.updateTime?.isEqual(before as Timestamp),
      'the record was written',
    );
    assert.equal(after.data()?.status, 'in_progress');
    assert.equal(after.data()?.attempt_id, current.attemptId);
    assert.equal(await other.complete(current), 'recorded');
  });

  it('a failed-run report ends a lapsed attempt: its heartbeat and completion then find the lease lost', async () => {
    const { ledger, collection, documents } = newLedger();
    const lapsed = claimOf(await ledger.claim('run-1'));
    await expireLease(collection, 'run-1');
    const { updateTime } = await documents.read('run-1');

    const reported = await reportFailure(
      documents,
      'run-1',
      updateTime as Timestamp,
      'check-1',
      'its lease lapsed',
    );

    assert.notEqual(reported, 'exists');
    assert.equal(await ledger.extend(lapsed), 'lease_lost');
    assert.equal(await ledger.complete(lapsed), 'lease_lost');
    const record = await storedRecord(collection, 'run-1');
    assert.equal(record.status, 'failed');
    assert.equal(record.attempt_id, lapsed.attemptId);
    assert.equal(record.last_error, 'its lease lapsed');
    assert.equal(record.reported_by, 'check-1');
  });

  it('a failed-run report fenced on an older read marks nothing', async () => {
    const { ledger, collection, documents } = newLedger();
    const claim = claimOf(await ledger.claim('run-1'));
    const { updateTime } = await documents.read('run-1');
    await ledger.release(claim, 'boom');
    const before = await storedRecord(collection, 'run-1');

    const reported = await reportFailure(
      documents,
      'run-1',
      updateTime as Timestamp,
      'check-1',
    );

    assert.equal(reported, 'exists');
    assert.deepEqual(await storedRecord(collection, 'run-1'), before);
  });

  it('concurrent takeovers of one expired lease from 8 instances: exactly one wins', async () => {
    const { ledger, collection } = newLedger();
    claimOf(await ledger.claim('run-1'));
    await expireLease(collection, 'run-1');
    const instances = Array.from(
      { length: 8 },
      () => newLedger({ collection }).ledger,
    );

    const results = await Promise.all(
      instances.map((instance) => instance.claim('run-1')),
    );

    const winners = results.filter((r) => r.state === 'claimed');
    assert.equal(winners.length, 1);
    assert.deepEqual(
      results.filter((r) => r.state !== 'claimed').map((r) => r.state),
      Array(7).fill('in_progress'),
    );
  });

  it('a record released between the failed create and the read is claimed anew', async () => {
    const { ledger: seed, collection } = newLedger();
    claimOf(await seed.claim('run-1'));
    let reads = 0;
    const db = hookedFirestore({
      get: async (real) => {
        if (reads++ === 0) {
          await real.delete();
        }
        return real.get();
      },
    });
    const { ledger } = newLedger({ collection }, db);

    const claim = claimOf(await ledger.claim('run-1'));

    assert.equal(claim.takeover, false);
    const record = await storedRecord(collection, 'run-1');
    assert.equal(record.attempt_id, claim.attemptId);
  });

  it('a record deleted between the read and the takeover: the takeover fails, a new claim wins', async () => {
    const { ledger: seed, collection } = newLedger();
    claimOf(await seed.claim('run-1'));
    await expireLease(collection, 'run-1');
    let updates = 0;
    const db = hookedFirestore({
      update: async (real, args) => {
        if (updates++ === 0) {
          await real.delete();
        }
        return real.update(
          ...(args as [
            FirebaseFirestore.UpdateData<FirebaseFirestore.DocumentData>,
          ]),
        );
      },
    });
    const { ledger } = newLedger({ collection }, db);

    const claim = claimOf(await ledger.claim('run-1'));

    assert.equal(updates, 1, 'the takeover was tried once');
    const record = await storedRecord(collection, 'run-1');
    assert.equal(record.attempt_id, claim.attemptId);
    assert.equal(record.status, 'in_progress');
  });

  it('a completion whose first try landed but whose answer was lost is recognised as ours', async () => {
    const { ledger: seed, collection } = newLedger();
    const lost = loseFirstUpdateAnswer();
    const { ledger } = newLedger({ collection }, lost.db);
    const claim = claimOf(await seed.claim('run-1'));

    const result = await ledger.complete(claim);

    assert.equal(result, 'recorded');
    assert.equal(lost.updates(), 2, 'the completion was retried');
    assert.equal(
      (await newLedger({ collection }).ledger.claim('run-1')).state,
      'completed',
    );
  });

  it('a release whose first try landed unanswered, its run claimed again by a retry before the retried release: recorded, not a lost lease', async () => {
    // --seed=391860920 (simulator): the release landed, its answer came late; a retry on another
    // instance claimed the failed run (within what would have been the release's lease); the
    // release's retry then met that claim and logged "lease lost … may have run twice".
    const { ledger: seed, collection } = newLedger();
    const retry = newLedger({ collection }).ledger;
    let retried: Claim | undefined;
    const lost = loseFirstUpdateAnswer(async () => {
      retried = claimOf(await retry.claim('run-1'));
    });
    const { ledger } = newLedger({ collection }, lost.db);
    const claim = claimOf(await seed.claim('run-1'));

    const result = await ledger.release(claim, 'the job threw');

    assert.equal(result, 'recorded');
    assert.equal(lost.updates(), 2, 'the release was retried');
    const stored = (
      await firestore.collection(collection).doc('run-1').get()
    ).data();
    assert.equal(stored?.attempt_id, retried?.attemptId, 'the retry holds it');
    assert.equal(stored?.last_error, 'the job threw');
    assert.equal(retried?.takeover, true);
  });

  it('a release that landed unanswered after its lease ended, its failed run then claimed by a retry: recorded, not a lost lease', async () => {
    // Invariant 50 of the simulator (--seed=2 --path 33 --faults): a job ran past its lease, its
    // release landed a moment after the lease ended with its answer lost, a Scheduler retry claimed
    // the failed run, and the release's retry met that claim and logged "lease lost … may have run
    // twice", though no takeover came first (the release could not have landed after one).
    const leaseMs = 1_000;
    const { ledger: seed, collection } = newLedger({ leaseMs });
    const retry = newLedger({ collection, leaseMs }).ledger;
    let retried: Claim | undefined;
    const lost = loseFirstUpdateAnswer(async () => {
      retried = claimOf(await retry.claim('run-1'));
    });
    const { ledger } = newLedger({ collection, leaseMs }, lost.db);
    const claim = claimOf(await seed.claim('run-1'));
    await sleep(leaseMs + 500); // the job ran past its lease

    const result = await ledger.release(claim, 'the job threw');

    assert.equal(result, 'recorded');
    assert.equal(lost.updates(), 2, 'the release was retried');
    assert.equal(retried?.takeover, true, 'the retry claimed the failed run');
    const stored = (
      await firestore.collection(collection).doc('run-1').get()
    ).data();
    assert.equal(stored?.attempt_id, retried?.attemptId, 'the retry holds it');
    assert.equal(stored?.last_error, 'the job threw');
  });

  it('a release that never landed after its lapsed lease was taken over, the taker failing with the same error: a lost lease', async () => {
    const leaseMs = 1_000;
    const { ledger: a, collection } = newLedger({ leaseMs });
    const b = newLedger({ collection, leaseMs }).ledger;
    const lapsed = claimOf(await a.claim('run-1'));
    await sleep(leaseMs + 500); // A's lease lapsed (its instance stalled)
    const takeover = claimOf(await b.claim('run-1'));
    assert.equal(takeover.takeover, true);
    assert.equal(await b.release(takeover, 'the job threw'), 'recorded');

    // The record: B's failure, one attempt after A's, failed after A's last write, the same error.
    assert.equal(await a.release(lapsed, 'the job threw'), 'lease_lost');
  });

  it('a completion or release that never landed, its record replaced under its live lease and run by others, is a lost lease (the review of the fix above)', async () => {
    const { ledger: a, collection } = newLedger({ leaseMs: 60_000 });
    const b = newLedger({ collection, leaseMs: 60_000 }).ledger;
    const c = newLedger({ collection, leaseMs: 60_000 }).ledger;
    const ref = firestore.collection(collection).doc('run-1');
    const completing = claimOf(await a.claim('run-1'));
    // Outside the protocol (a hand deletes a live record): B claims anew and fails.
    await ref.delete();
    const first = claimOf(await b.claim('run-1'));
    assert.equal(await b.release(first, 'B threw'), 'recorded');

    assert.equal(await a.complete(completing), 'lease_lost');

    const releasing = claimOf(await a.claim('run-2'));
    const other = firestore.collection(collection).doc('run-2');
    await other.delete();
    const second = claimOf(await b.claim('run-2'));
    await b.release(second, 'B threw');
    claimOf(await c.claim('run-2'));

    assert.equal(await a.release(releasing, 'A threw'), 'lease_lost');
  });

  it('a claim whose create landed but answered UNAVAILABLE, retried by the client into ALREADY_EXISTS, is ours', async () => {
    const { db, commits } = await loseCommitAnswers(1);
    const { ledger, collection } = newLedger({}, db);

    const claim = claimOf(await ledger.claim('run-1'));

    assert.equal(commits(), 2, 'the client sent the create again');
    const record = await storedRecord(collection, 'run-1');
    assert.equal(record.attempt_id, claim.attemptId);
    assert.equal(record.status, 'in_progress');
    assert.equal(claim.takeover, false);
    assert.equal(
      await ledger.complete(claim),
      'recorded',
      'the claim’s fencing token is the record’s',
    );
    assert.equal(
      (await newLedger({ collection }).ledger.claim('run-1')).state,
      'completed',
    );
  });

  it('a takeover whose update landed but whose answer was lost is ours, keeping the first claim', async () => {
    const { ledger: seed, collection } = newLedger();
    claimOf(await seed.claim('run-1'));
    await expireLease(collection, 'run-1');
    const stamped = (await storedRecord(collection, 'run-1'))
      .first_claimed_at as Timestamp;
    let updates = 0;
    const db = hookedFirestore({
      update: async (real, args) => {
        updates++;
        await real.update(
          ...(args as [
            FirebaseFirestore.UpdateData<FirebaseFirestore.DocumentData>,
          ]),
        );
        // The client's retry of the landed write: its precondition no longer holds.
        throw grpcError(
          9,
          'FAILED_PRECONDITION: the document was updated since',
        );
      },
    });
    const { ledger } = newLedger({ collection }, db);

    const claim = claimOf(await ledger.claim('run-1'));

    assert.equal(updates, 1, 'the takeover was sent once');
    assert.equal(claim.takeover, true);
    assert.equal(claim.firstClaimedAt.getTime(), stamped.toDate().getTime());
    assert.equal(
      (await storedRecord(collection, 'run-1')).attempt_id,
      claim.attemptId,
    );
  });

  it('a second delivery on the same instance while the lost-answer claim is in flight answers in_progress, with the claim’s holder', async () => {
    const { db } = await loseCommitAnswers(1);
    const { ledger } = newLedger({}, db);

    const [a, b] = await Promise.all([
      ledger.claim('run-1'),
      ledger.claim('run-1'),
    ]);

    const claim = claimOf(a);
    assert.equal(b.state, 'in_progress');
    assert.equal(
      b.state === 'in_progress' && b.holder?.attemptId,
      claim.attemptId,
    );
    await ledger.complete(claim);
    assert.equal(
      (await ledger.claim('run-1')).state,
      'completed',
      'then a duplicate, not a 409',
    );
  });

  it('a completion that fails every try throws LedgerUnavailableError and leaves the claim', async () => {
    const { ledger: seed, collection } = newLedger();
    let updates = 0;
    const db = hookedFirestore({
      update: async () => {
        updates++;
        throw grpcError(14);
      },
    });
    const { ledger } = newLedger({ collection }, db);
    const claim = claimOf(await seed.claim('run-1'));

    await assert.rejects(ledger.complete(claim), LedgerUnavailableError);

    assert.equal(updates, 3);
    assert.equal(
      (await seed.documents.read('run-1')).record?.status,
      'in_progress',
    );
  });

  it('a Firestore that does not answer fails the claim within the timeout', async () => {
    const db = hookedFirestore({ create: () => new Promise(() => {}) });
    const { ledger } = newLedger({ timeoutMs: 300 }, db);
    const started = Date.now();

    await assert.rejects(ledger.claim('run-1'), (err: Error) => {
      assert.ok(err instanceof LedgerUnavailableError);
      assert.match(err.message, /did not answer the claim within 300 ms/);
      return true;
    });

    assert.ok(Date.now() - started < 2000, `took ${Date.now() - started} ms`);
  });

  it('a Firestore error other than a lost race is LedgerUnavailableError with the cause', async () => {
    const cause = grpcError(
      7,
      'PERMISSION_DENIED: missing roles/datastore.user',
    );
    const db = hookedFirestore({ create: async () => Promise.reject(cause) });
    const { ledger } = newLedger({}, db);

    await assert.rejects(ledger.claim('run-1'), (err: Error) => {
      assert.ok(err instanceof LedgerUnavailableError);
      assert.equal(err.cause, cause);
      assert.match(err.message, /roles\/datastore.user/);
      return true;
    });
  });

  it('50 concurrent claims from 10 instances: exactly one is claimed, the rest in_progress', async () => {
    const { collection } = newLedger();
    const instances = Array.from(
      { length: 10 },
      () => newLedger({ collection }).ledger,
    );

    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => instances[i % 10]?.claim('run-1')),
    );

    const states = results.map((r) => r?.state);
    assert.equal(states.filter((s) => s === 'claimed').length, 1);
    assert.equal(states.filter((s) => s === 'in_progress').length, 49);
  });

  it('single flight: 50 concurrent claims on one instance cost one create and no read', async () => {
    const { db, calls } = countingFirestore();
    const { ledger } = newLedger({}, db);

    const results = await Promise.all(
      Array.from({ length: 50 }, () => ledger.claim('run-1')),
    );
    const whileHeld = await ledger.claim('run-1');

    assert.equal(results.filter((r) => r.state === 'claimed').length, 1);
    assert.equal(whileHeld.state, 'in_progress');
    assert.deepEqual(calls, { create: 1, get: 0, update: 0, delete: 0 });
  });

  it('single flight: once the run is completed, the instance asks Firestore again', async () => {
    const { db, calls } = countingFirestore();
    const { ledger } = newLedger({}, db);
    const claim = claimOf(await ledger.claim('run-1'));
    await ledger.complete(claim);

    const again = await ledger.claim('run-1');

    assert.equal(again.state, 'completed');
    assert.deepEqual(
      { create: calls.create, get: calls.get },
      { create: 2, get: 1 },
      'the first claim, then a create and a read',
    );
  });

  it('never takes over a run it still holds itself, even once the stored lease has lapsed', async () => {
    const { db, calls } = countingFirestore();
    const { collection } = newLedger();
    const { ledger } = newLedger({ collection }, db);
    const held = claimOf(await ledger.claim('run-1'));
    await expireLease(collection, 'run-1');

    const again = await ledger.claim('run-1');

    assert.equal(again.state, 'in_progress');
    assert.equal(
      again.state === 'in_progress' && again.holder?.attemptId,
      held.attemptId,
    );
    assert.equal(calls.create, 1, 'no second claim was sent');
    assert.equal(
      (await storedRecord(collection, 'run-1')).attempt_id,
      held.attemptId,
    );
  });

  it('a create() against a database that does not exist is unavailable, naming FIRESTORE_DATABASE', async () => {
    const notFound = grpcError(
      5,
      'NOT_FOUND: The database (default) does not exist',
    );
    const db = hookedFirestore({
      create: async () => Promise.reject(notFound),
    });
    const { ledger } = newLedger({}, db);

    await assert.rejects(ledger.claim('run-1'), (err: Error) => {
      assert.ok(err instanceof DatabaseNotFoundError);
      assert.ok(err instanceof LedgerUnavailableError);
      assert.match(err.message, /database "\(default\)" was not found/);
      assert.match(err.message, /check FIRESTORE_DATABASE/);
      assert.equal(err.cause, notFound);
      return true;
    });
  });

  describe('a record it cannot read is never overwritten', () => {
    const future = () => Timestamp.fromMillis(Date.now() + 60_000);
    const shapes: [string, Record<string, unknown>, string][] = [
      [
        'in_progress without any lease',
        { status: 'in_progress', attempt_id: 'a' },
        'leased_at',
      ],
      [
        'in_progress whose leased_at is a string',
        {
          status: 'in_progress',
          attempt_id: 'a',
          leased_at: PAST_NOON,
          lease_ms: 1000,
        },
        'leased_at',
      ],
      [
        'in_progress whose lease_ms is missing',
        { status: 'in_progress', attempt_id: 'a', leased_at: Timestamp.now() },
        'lease_ms',
      ],
      [
        'in_progress whose lease_ms is negative',
        {
          status: 'in_progress',
          attempt_id: 'a',
          leased_at: Timestamp.now(),
          lease_ms: -5,
        },
        'lease_ms',
      ],
      [
        'in_progress with only a lease_expires timestamp (a shape this version never writes)',
        { status: 'in_progress', attempt_id: 'a', lease_expires: future() },
        'leased_at',
      ],
      [
        'in_progress without attempt_id',
        { status: 'in_progress', leased_at: Timestamp.now(), lease_ms: 1000 },
        'attempt_id',
      ],
      [
        'a numeric status',
        { status: 2, attempt_id: 'a', lease_expires: future() },
        'status',
      ],
      ['no status', { attempt_id: 'a', lease_expires: future() }, 'status'],
      [
        'status "COMPLETED"',
        { status: 'COMPLETED', attempt_id: 'a' },
        'status',
      ],
    ];
    for (const [what, data, field] of shapes) {
      it(`${what}: claim answers unreadable naming ${field}, the document is unchanged`, async () => {
        const { ledger, collection } = newLedger();
        const ref = firestore.collection(collection).doc('run-1');
        await ref.set(data);
        const before = (await ref.get()).updateTime?.toMillis();

        const result = await ledger.claim('run-1');

        assert.equal(result.state, 'unreadable');
        assert.equal(
          result.state === 'unreadable' && result.record.field,
          field,
        );
        const after = await ref.get();
        assert.equal(after.updateTime?.toMillis(), before, 'not written');
        assert.deepEqual(after.data(), data);
      });
    }
  });
});

describe('RunLedger: a claim with a guarded write (the overlap lock rides on it)', () => {
  /** A guard on document `lock` of the ledger's per-job collection, as read now. */
  async function guardOn(
    jobDocuments: RunDocuments,
    holder: string,
  ): Promise<GuardedWrite> {
    const { updateTime } = await jobDocuments.readData('lock');
    return {
      documents: jobDocuments,
      id: 'lock',
      what: 'test lock',
      data: { holder },
      token: updateTime,
    };
  }

  it('two claims guarded on one read of the lock, from two instances: one lands with its lock write, the other writes nothing', async () => {
    const a = newLedger();
    const b = newLedger({ collection: a.collection });
    await a.jobDocuments.write('lock', 'test lock', { holder: 'nobody' });
    const guardA = await guardOn(a.jobDocuments, 'run-a');
    const guardB = await guardOn(b.jobDocuments, 'run-b');

    const results = await Promise.all([
      a.ledger.claim('run-a', {}, guardA),
      b.ledger.claim('run-b', {}, guardB),
    ]);

    const states = results.map((r) => r.state).sort();
    assert.deepEqual(states, ['claimed', 'guard_changed']);
    const winner = results[0]?.state === 'claimed' ? 'run-a' : 'run-b';
    const loser = winner === 'run-a' ? 'run-b' : 'run-a';
    assert.equal(
      (await storedRecord(`${a.collection}_jobs`, 'lock')).holder,
      winner,
    );
    assert.equal(
      (await storedRecord(a.collection, winner)).status,
      'in_progress',
    );
    assert.equal(
      await storedRecord(a.collection, loser).catch(() => undefined),
      undefined,
    );
  });

  it('a takeover guarded on a lock that changed since its read writes neither the record nor the lock', async () => {
    const { ledger, collection, jobDocuments } = newLedger();
    const crashed = newLedger({ collection });
    claimOf(await crashed.ledger.claim('run-1'));
    await expireLease(collection, 'run-1');
    await jobDocuments.write('lock', 'test lock', { holder: 'run-1' });
    const stale = await guardOn(jobDocuments, 'run-1');
    await firestore
      .collection(`${collection}_jobs`)
      .doc('lock')
      .update({ holder: 'run-2' });
    const before = await storedRecord(collection, 'run-1');

    const result = await ledger.claim('run-1', {}, stale);

    assert.equal(result.state, 'guard_changed');
    assert.deepEqual(await storedRecord(collection, 'run-1'), before);
    assert.equal(
      (await storedRecord(`${collection}_jobs`, 'lock')).holder,
      'run-2',
    );
  });

  it('a guarded claim whose batch landed but answered UNAVAILABLE is ours: the lock it moved is its own', async () => {
    const { db, commits } = await loseCommitAnswers(1);
    const { ledger, jobDocuments, collection } = newLedger({}, db);
    // No lock yet: the batch creates it, so the client's retry finds it (and the record) there.
    const guard = await guardOn(jobDocuments, 'run-1');

    const result = await ledger.claim('run-1', {}, guard);

    assert.ok(commits() >= 2, 'the client sent the batch again');
    assert.equal(result.state, 'claimed');
    const claim = claimOf(result);
    assert.equal(
      (await storedRecord(collection, 'run-1')).attempt_id,
      claim.attemptId,
    );
    assert.equal(
      (await storedRecord(`${collection}_jobs`, 'lock')).holder,
      'run-1',
    );
    assert.equal(await ledger.complete(claim), 'recorded');
  });

  it('a guard on an absent document lands only while it is absent', async () => {
    const { ledger, jobDocuments, collection } = newLedger();
    const absent = await guardOn(jobDocuments, 'run-1');
    await jobDocuments.write('lock', 'test lock', { holder: 'someone' });

    const result = await ledger.claim('run-1', {}, absent);

    assert.equal(result.state, 'guard_changed');
    assert.equal(
      await storedRecord(collection, 'run-1').catch(() => undefined),
      undefined,
    );
  });
});
