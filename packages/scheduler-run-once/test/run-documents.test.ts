/**
 * Firestore's time as a warm instance knows it, against the real emulator: the time of
 * Firestore's latest answer plus the monotonic time elapsed since, whatever the wall clock does.
 */

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RunDocuments } from '../src/core/run-documents.ts';
import { countingFirestore, firestore, freshCollection } from './helpers.ts';

const FIVE_MINUTES_MS = 300_000;
/** How far an estimate may trail a read's time: one emulator round trip on a loaded machine. */
const ROUND_TRIP_MS = 2_000;

function documentsWith(): RunDocuments {
  return new RunDocuments(firestore, {
    collection: freshCollection(),
    retentionMs: 86_400_000,
    timeoutMs: 10_000,
  });
}

/** Firestore's time now, read by a client of its own. */
async function firestoreNow(): Promise<number> {
  const snap = await firestore.collection(freshCollection()).doc('clock').get();
  return snap.readTime.toMillis();
}

function assertNear(actual: number, expected: number, what: string): void {
  const off = actual - expected;
  assert.ok(
    Math.abs(off) < ROUND_TRIP_MS,
    `${what} is ${off} ms off Firestore's time`,
  );
}

describe('RunDocuments server time', () => {
  it('a wall clock stepped back 5 minutes on a warm instance leaves serverTime at Firestore’s time', async (t) => {
    const documents = documentsWith();
    await documents.read('run-1');
    const realNow = Date.now.bind(Date);
    t.mock.method(Date, 'now', () => realNow() - FIVE_MINUTES_MS);

    const estimate = (await documents.serverTime()).getTime();

    t.mock.restoreAll();
    assertNear(estimate, await firestoreNow(), 'serverTime after the step');
  });

  it('a wall clock stepped forward 5 minutes leaves expire_at at Firestore’s time plus the retention', async (t) => {
    const documents = documentsWith();
    await documents.read('run-1');
    const realNow = Date.now.bind(Date);
    t.mock.method(Date, 'now', () => realNow() + FIVE_MINUTES_MS);

    const expireAt = documents.expireAt().toMillis();

    t.mock.restoreAll();
    assertNear(
      expireAt - 86_400_000,
      await firestoreNow(),
      'expire_at − retention',
    );
  });

  it('serverTime moves with the monotonic clock since Firestore’s last answer, not the wall clock', async (t) => {
    let monotonic = 1_000;
    t.mock.method(performance, 'now', () => monotonic);
    const documents = documentsWith();
    const { readTime } = await documents.read('run-1');

    monotonic += 90_000;

    // Within a millisecond: the read's time as a Date is rounded, the estimate's floored.
    const off =
      (await documents.serverTime()).getTime() - (readTime.getTime() + 90_000);
    assert.ok(Math.abs(off) <= 1, `${off} ms off the read's time plus 90 s`);
  });

  it('an answer carrying an older time than one already seen does not move serverTime back', async (t) => {
    let monotonic = 0;
    t.mock.method(performance, 'now', () => monotonic);
    const documents = documentsWith();
    const { readTime } = await documents.read('run-1');
    // The monotonic clock ran ahead while a second read was answered: its time is the older one.
    monotonic += 60_000;
    await documents.read('run-2');

    assert.ok(
      (await documents.serverTime()).getTime() >=
        readTime.getTime() + 60_000 - 1,
    );
  });

  it('a batched read of no ids answers with Firestore’s time, not the wall clock', async (t) => {
    const documents = documentsWith();
    await documents.read('run-1');
    const realNow = Date.now.bind(Date);
    t.mock.method(Date, 'now', () => realNow() - FIVE_MINUTES_MS);

    const { readTime } = await documents.readMany([]);

    t.mock.restoreAll();
    assertNear(
      readTime.getTime(),
      await firestoreNow(),
      'the empty read’s time',
    );
  });

  it('connect opens the channel but learns no clock from its answer, which an idle instance may handle late', async () => {
    const { db, calls } = countingFirestore();
    const documents = new RunDocuments(db, {
      collection: freshCollection(),
      retentionMs: 86_400_000,
      timeoutMs: 10_000,
    });

    await documents.connect();
    const readsAfterConnect = calls.get;
    const estimate = (await documents.serverTime()).getTime();

    assert.equal(readsAfterConnect, 1);
    assert.equal(
      calls.get,
      2,
      'serverTime read the clock itself, in the request that asked',
    );
    assertNear(estimate, await firestoreNow(), 'serverTime after connect');
  });
});
