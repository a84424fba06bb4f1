/**
 * A claim whose commit lands but whose answer comes late, or never (issue 40): a TCP proxy between
 * the function and the emulator lets the claim's commit through and holds Firestore's answers past
 * FIRESTORE_TIMEOUT_SECONDS, so the delivery is answered 5xx while its record says `in_progress`.
 * Scheduler's retry comes one back-off later, to the same instance or another one; it must run the
 * slot, and the job's next slot must neither be skipped nor wait behind the dead claim.
 *
 * Scaled down: FIRESTORE_TIMEOUT_SECONDS 1 (a claim's lease: 3 timeouts, 3 s), LEASE_SECONDS 30,
 * and a 3 s back-off before the retry (Scheduler's `minBackoff`; the shipped one is 30 s, the
 * shipped timeout 10 s and claim lease 30 s, in the same proportions).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  type AnswerProxy,
  startAnswerProxy,
} from '../fixtures/answer-proxy.ts';
import {
  type Delivery,
  deliver,
  type FunctionProcess,
  removeScratch,
  scheduled,
  sleep,
  startFunction,
  storedRunOf,
  warmUp,
} from '../fixtures/harness.ts';
import { PAST_NOON_MS, rfc3339 } from '../fixtures/times.ts';

after(removeScratch);

/** Scheduler's back-off before the retry, ms: the 500 came one timeout after the claim was sent. */
const RETRY_BACKOFF_MS = 3_000;
/** How long a late answer is held before it is delivered, ms: past the 1 s timeout. */
const LATE_BY_MS = 1_500;
/** A claim's bytes, as the proxy sees them: the record's status in the commit. */
const CLAIM_MARKER = 'in_progress';

const JOB_IDS = [
  'late_allow',
  'never_allow',
  'late_skip',
  'never_skip',
  'late_wait',
  'never_wait',
] as const;

interface Case {
  readonly job: (typeof JOB_IDS)[number];
  /** The answer to the claim's commit: `late` (delivered after the timeout) or `never` (dropped). */
  readonly answer: 'late' | 'never';
  /** Where Scheduler's retry lands: the instance whose claim went unanswered, or another one. */
  readonly retryOn: 'same' | 'other';
}

const CASES: readonly Case[] = [
  { job: 'late_allow', answer: 'late', retryOn: 'same' },
  { job: 'never_allow', answer: 'never', retryOn: 'other' },
  { job: 'late_skip', answer: 'late', retryOn: 'other' },
  { job: 'never_skip', answer: 'never', retryOn: 'same' },
  { job: 'late_wait', answer: 'late', retryOn: 'same' },
  { job: 'never_wait', answer: 'never', retryOn: 'other' },
];

describe('a claim answered late or never (a proxy holds the commit’s answer)', () => {
  let proxy: AnswerProxy;
  let held: FunctionProcess;
  let other: FunctionProcess;
  const emulatorHost = process.env.FIRESTORE_EMULATOR_HOST ?? '';

  before(async () => {
    proxy = await startAnswerProxy(emulatorHost);
    const env = {
      FIRESTORE_TIMEOUT_SECONDS: '1',
      LEASE_SECONDS: '30',
      FAULT_JOB_IDS: JOB_IDS.join(','),
    };
    held = await startFunction({
      env: { ...env, FIRESTORE_EMULATOR_HOST: proxy.host },
    });
    other = await startFunction({ collection: held.collection, env });
    await Promise.all([warmUp(held), warmUp(other)]);
  });
  after(async () => {
    await Promise.all([held?.kill(), other?.kill()]);
    await proxy?.close();
  });

  for (const { job, answer, retryOn } of CASES) {
    it(`${job}: the retry on the ${retryOn} instance runs the slot once, and the next slot runs`, async (t) => {
      const slot = scheduled(job, rfc3339(PAST_NOON_MS));
      const nextSlot = scheduled(job, rfc3339(PAST_NOON_MS + 60_000));
      const retryTarget = retryOn === 'same' ? held : other;

      const sent = proxy.holdAnswersAfter(CLAIM_MARKER);
      const first = await deliver(held.url, slot);
      await sent;
      if (answer === 'late') {
        await sleep(Math.max(0, LATE_BY_MS - first.ms));
        proxy.releaseAnswers();
      } else {
        proxy.dropAnswers();
      }
      await sleep(RETRY_BACKOFF_MS);
      const retry = await deliver(retryTarget.url, slot);
      const next = await deliver(retryTarget.url, nextSlot);
      t.diagnostic(summary({ first, retry, next }));

      assert.ok(
        first.status >= 500,
        `the unanswered claim's delivery: ${first.status}`,
      );
      assert.equal(first.body.outcome, 'unavailable');
      assert.equal(
        retry.status,
        200,
        `the retry: ${JSON.stringify(retry.body)}`,
      );
      assert.equal(retry.body.outcome, 'processed');
      assert.equal(
        next.body.outcome,
        'processed',
        `the next slot: ${JSON.stringify(next.body)}`,
      );
      const runId = retry.body.runId ?? '';
      // Both instances append to one executions file (they share the collection).
      const starts = held.executions(runId).filter((e) => e.event === 'start');
      assert.equal(starts.length, 1);
      const stored = await storedRunOf({ ...held, emulatorHost }, runId);
      assert.equal(stored?.status, 'completed');
    });
  }
});

function summary(deliveries: Readonly<Record<string, Delivery>>): string {
  const parts = Object.entries(deliveries).map(
    ([name, d]) =>
      `${name} ${d.status} ${d.body.outcome ?? '-'} in ${Math.round(d.ms)} ms`,
  );
  return parts.join('; ');
}
