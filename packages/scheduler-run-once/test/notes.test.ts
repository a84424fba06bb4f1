/**
 * Notes (`ctx.note`) against the real Firestore emulator: the total a record holds is bounded, so
 * its completion can always be written, and the bound is exact across a takeover.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Timestamp } from '@google-cloud/firestore';
import { RunOnceError } from '../src/core/errors.ts';
import type { Claim, ClaimResult } from '../src/core/ledger.ts';
import { MAX_NOTES, MAX_NOTES_BYTES } from '../src/core/notes.ts';
import { firestore, newLedger, storedRecord } from './helpers.ts';

function claimOf(result: ClaimResult): Claim {
  assert.equal(
    result.state,
    'claimed',
    `expected a claim, got ${result.state}`,
  );
  return (result as Extract<ClaimResult, { state: 'claimed' }>).claim;
}

/** The largest note one call accepts: 20 fields of 1500 characters (about 30 KiB). */
const bigNote = Object.fromEntries(
  Array.from({ length: 20 }, (_, i) => [`field${i}`, 'x'.repeat(1500)]),
);

describe('notes: bounded per record', () => {
  it('refuses the note that would take the notes past MAX_NOTES_BYTES, naming it, and the run still completes', async () => {
    const { ledger, collection } = newLedger({
      leaseMs: 300_000,
      retentionMs: 86_400_000,
    });
    let claim = claimOf(await ledger.claim('run-notes'));

    let refused: unknown;
    let written = 0;
    for (let i = 0; i < 40; i++) {
      try {
        const renewed = await ledger.note(claim, `step${i}`, bigNote);
        assert.notEqual(renewed, 'lease_lost');
        claim = renewed as Claim;
        written++;
      } catch (err) {
        refused = err;
        break;
      }
    }
    const completion = await ledger.complete(claim);

    assert.ok(
      refused instanceof RunOnceError,
      `refused with ${String(refused)}`,
    );
    assert.match(
      refused.message,
      new RegExp(
        `note step${written} would bring the run's notes to \\d+ bytes, above the ${MAX_NOTES_BYTES}`,
      ),
    );
    assert.ok(written >= 8, `${written} notes written`);
    assert.equal(completion, 'recorded');
    const record = await storedRecord(collection, 'run-notes');
    assert.equal(record.status, 'completed');
    assert.equal(Object.keys(record.notes as object).length, written);
  });

  it('counts the notes an earlier attempt left: a takeover refuses the note past the bound', async () => {
    const { ledger, collection } = newLedger({
      leaseMs: 300_000,
      retentionMs: 86_400_000,
    });
    let first = claimOf(await ledger.claim('run-takeover'));
    for (let i = 0; i < 8; i++) {
      first = (await ledger.note(first, `step${i}`, bigNote)) as Claim;
    }
    await firestore
      .collection(collection)
      .doc('run-takeover')
      .update({ leased_at: Timestamp.fromMillis(Date.now() - 3_600_000) });
    const { ledger: other } = newLedger({
      leaseMs: 300_000,
      retentionMs: 86_400_000,
      collection,
    });

    const second = claimOf(await other.claim('run-takeover'));

    assert.equal(second.takeover, true);
    assert.equal(Object.keys(second.notes).length, 8);
    await assert.rejects(
      other.note(second, 'step8', bigNote),
      /note step8 would bring/,
    );
    const replaced = await other.note(second, 'step0', { done: true });
    assert.notEqual(replaced, 'lease_lost', 'replacing a note frees its bytes');
  });

  it(`refuses note ${MAX_NOTES + 1} of a record, and accepts replacing an existing one`, async () => {
    const { ledger } = newLedger({ leaseMs: 300_000, retentionMs: 86_400_000 });
    let claim = claimOf(await ledger.claim('run-count'));
    const notes = Object.fromEntries(
      Array.from({ length: MAX_NOTES }, (_, i) => [`n${i}`, i]),
    );
    // The last note's write carries the count; set the others as if already written.
    claim = {
      ...claim,
      notes: Object.fromEntries(Object.entries(notes).slice(0, -1)),
    };
    claim = (await ledger.note(
      claim,
      `n${MAX_NOTES - 1}`,
      MAX_NOTES - 1,
    )) as Claim;

    await assert.rejects(
      ledger.note(claim, 'oneTooMany', 1),
      (err: unknown) =>
        err instanceof RunOnceError &&
        /note oneTooMany would be note 101 .* at most 100/.test(err.message),
    );
    assert.notEqual(await ledger.note(claim, 'n0', 'replaced'), 'lease_lost');
  });
});
