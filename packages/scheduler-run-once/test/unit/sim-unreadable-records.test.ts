/**
 * The records another version writes in the simulator (`test/sim/foreign-writes.ts`,
 * `UNREADABLE_FORMS`): each form is unreadable both to the simulator's judge (`unreadableBecause`,
 * the documented rules written out again) and to the product's parser (`run-record.ts`), and a
 * record this version writes is readable to both; the event's time picks each form. No simulation,
 * no Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type DocumentData,
  type QueryDocumentSnapshot,
  Timestamp,
} from '@google-cloud/firestore';
import { judgedAt, runRecordConverter } from '../../src/core/run-record.ts';
import { validateJobs } from '../../src/policy/job-declaration.ts';
import {
  type ForeignStore,
  UNREADABLE_FORMS,
  unreadableBecause,
  unreadableFormAt,
  unreadableFormsFrom,
  unreadableRecord,
} from '../sim/foreign-writes.ts';

const NOW_MS = Date.parse('2026-10-16T12:00:00Z');
const SLOT_MS = Date.parse('2026-10-16T12:01:00Z');

const [job] = validateJobs([
  { id: 'job-0', schedule: '* * * * *', run: () => {} },
]);

/** A world that writes nothing: only what the record builder asks of it. */
const world = {
  now: () => NOW_MS,
  retentionMs: 86_400_000,
  randomRunId: () => 'a'.repeat(64),
} as unknown as ForeignStore;

/** What the product's parser makes of `data`, judged at the same time. */
function productReads(data: DocumentData): string {
  const parsed = runRecordConverter.fromFirestore({
    data: () => data,
  } as unknown as QueryDocumentSnapshot);
  return judgedAt(parsed, new Date(NOW_MS)).status;
}

describe("another version's unreadable records (simulator)", () => {
  for (const form of UNREADABLE_FORMS) {
    it(`${form}: unreadable to the judge and to the product`, () => {
      const data = unreadableRecord(world, job as never, SLOT_MS, form);

      assert.notEqual(unreadableBecause(data, NOW_MS), undefined, form);
      assert.equal(productReads(data), 'unreadable', form);
    });
  }

  it('reads a live record of this version, and a failed one, as both do', () => {
    const live = {
      status: 'in_progress',
      attempt_id: 'attempt-1',
      attempts: 1,
      leased_at: Timestamp.fromMillis(NOW_MS),
      lease_ms: 30_000,
    };
    const failed = { status: 'failed', attempt_id: 'attempt-1', attempts: 2 };

    for (const data of [live, failed]) {
      assert.equal(unreadableBecause(data, NOW_MS), undefined);
      assert.notEqual(productReads(data), 'unreadable');
    }
  });

  it('picks an unknown status one second in two, and every malformed form in turn', () => {
    const seconds = Array.from(
      { length: 2 * UNREADABLE_FORMS.length },
      (_, i) => unreadableFormAt(i * 1000 + 500),
    );

    assert.equal(
      seconds.filter((form) => form === 'unknown_status').length,
      UNREADABLE_FORMS.length,
    );
    assert.deepEqual(new Set(seconds), new Set(UNREADABLE_FORMS));
  });

  it('writes each form once from the event’s own, so one event meets every form', () => {
    for (const first of UNREADABLE_FORMS) {
      const forms = unreadableFormsFrom(first);

      assert.equal(forms[0], first);
      assert.equal(forms.length, UNREADABLE_FORMS.length);
      assert.deepEqual(new Set(forms), new Set(UNREADABLE_FORMS));
    }
  });
});
