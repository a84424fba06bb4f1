/**
 * The run ledger's lease protocol: claim a run, extend its lease, note, complete or release it.
 * What a record is lives in `run-record.ts`, the Firestore calls in `run-documents.ts`. Every write
 * is one atomic operation with a precondition, fenced on the update time of our own last write
 * (why, and how lost answers are recognised: docs/how-it-works.md, "The run ledger in detail").
 */

import { randomUUID } from 'node:crypto';
import type { DocumentData, Firestore, Timestamp } from '@google-cloud/firestore';
import { RunOnceError } from './errors.ts';
import { type NoteValue, noteProblem, notesBoundProblem } from './notes.ts';
import {
  claimDocument,
  completionUpdate,
  extensionUpdate,
  failureUpdate,
  reportedUpdate,
  takeoverUpdate,
} from './record-writes.ts';
import {
  type DocumentRead,
  type GuardChanged,
  type GuardedWrite,
  RunDocuments,
  type RunDocumentsOptions,
} from './run-documents.ts';
import {
  claimDecision,
  type RunDetails,
  type RunRecord,
  RunStatus,
  type StoredRecord,
  type UnreadableRecord,
} from './run-record.ts';

/** A claim held by this attempt: what the lease heartbeat, completion and release need. */
export interface Claim {
  readonly runId: string;
  readonly attemptId: string;
  /** Update time of our last write to the run document: the fencing token of every later write. */
  readonly fencingToken: Timestamp;
  /** When the lease lapses, by Firestore's clock: our last write's time + `leaseMs` (decisions read the stored one). */
  readonly leaseExpires: Date;
  /** The lease length, ms: the heartbeat beats at a third of it. */
  readonly leaseMs: number;
  /** True when this claim took over an earlier attempt's record (a lapsed lease, a failure). */
  readonly takeover: boolean;
  /** The notes stored in the record: exact, since only the holder writes notes (fenced). */
  readonly notes: Readonly<Record<string, NoteValue>>;
  /** When the run's first attempt claimed it, by Firestore's clock (`first_claimed_at`). */
  readonly firstClaimedAt: Date;
  /** How many attempts claimed the run, this one included (`attempts`). */
  readonly attempts: number;
}

/** The attempt holding a run, as far as a claim could tell. */
export interface Holder {
  readonly attemptId: string;
  /** When its lease lapses, by Firestore's clock. */
  readonly leaseExpires: Date;
}

/**
 * What a claim found. `holder` is unknown when lost races left no record to read; `unreadable` is
 * never overwritten; `guard_changed`: the guarded document changed, nothing was written.
 */
export type ClaimResult =
  | { readonly state: 'claimed'; readonly claim: Claim }
  | { readonly state: 'guard_changed' }
  | { readonly state: 'completed'; readonly record: RunRecord }
  | { readonly state: 'in_progress'; readonly holder: Holder | undefined }
  | { readonly state: 'unreadable'; readonly record: UnreadableRecord };

/** A fenced write `recorded` (or an earlier try of ours had), or `lease_lost`: it changed nothing. */
export type FenceResult = 'recorded' | 'lease_lost';

/**
 * What `runOnce` needs of a ledger. {@link RunLedger} implements it; so do the bench's baselines.
 * Every method may throw {@link LedgerUnavailableError}.
 */
export interface Ledger {
  /**
   * Claims `runId` for a fresh attempt, or says why not; with `guard`, both writes land or neither
   * (`guard_changed`). Throws if it cannot commit a guard, never claims without it.
   */
  claim(
    runId: string,
    details?: RunDetails,
    guard?: GuardedWrite,
    options?: ClaimOptions,
  ): Promise<ClaimResult>;
  /** Extends a held lease, fenced; returns the renewed claim. */
  extend(claim: Claim): Promise<Claim | 'lease_lost'>;
  /** Marks the run completed, fenced. */
  complete(claim: Claim): Promise<FenceResult>;
  /** Releases the claim after a failed attempt, fenced, `reporter` marking it reported. */
  release(claim: Claim, failure?: string, reporter?: string): Promise<FenceResult>;
  /** Notes a value in the run's record, fenced, extending the lease. @throws {RunOnceError} for a bad note. */
  note(claim: Claim, name: string, value: NoteValue): Promise<Claim | 'lease_lost'>;
}

/** How a claim treats what it finds. */
export interface ClaimOptions {
  /** Take over a run reported missed or failed after retries (a backfill's delivery); else `completed`. */
  readonly reopenReported?: boolean;
}

/** Ledger settings. */
export interface LedgerOptions {
  /** Lease length of a claim, ms (LEASE_SECONDS × 1000). */
  readonly leaseMs: number;
}

/** How often a claim re-reads after losing a race before reporting the run as in progress. */
const MAX_CLAIM_ROUNDS = 4;
/** Tries of a fenced write whose failure looks transient, and the first back-off. */
const FENCED_WRITE_TRIES = 3;
const FENCED_WRITE_BACKOFF_MS = 200;

/**
 * Claims, extends, completes and releases runs in Firestore. Safe to share across requests; single
 * flight per instance: while it holds or is claiming a run, claims of it answer `in_progress`
 * without a Firestore call (docs/how-it-works.md, "Claims: rounds, single flight and guarded writes").
 *
 * @example
 * const ledger = new RunLedger(documents, { leaseMs: 300_000 });
 * const result = await ledger.claim(runId, { jobName: 'nightly-report' });
 * if (result.state === 'claimed') await doTheWork().then(() => ledger.complete(result.claim));
 */
export class RunLedger implements Ledger {
  readonly #documents: RunDocuments;
  readonly #leaseMs: number;
  /** Claims sent to Firestore and not yet answered, by run id. */
  readonly #claiming = new Map<string, Promise<ClaimResult>>();
  /** Runs this instance holds (claimed, not completed or released). */
  readonly #held = new Map<string, Holder>();

  constructor(documents: RunDocuments, options: LedgerOptions) {
    this.#documents = documents;
    this.#leaseMs = options.leaseMs;
  }

  /** A ledger on its own {@link RunDocuments} over `db`, e.g. `RunLedger.open(db, { collection, leaseMs, retentionMs, timeoutMs })`. */
  static open(db: Firestore, options: LedgerOptions & RunDocumentsOptions): RunLedger {
    return new RunLedger(new RunDocuments(db, options), options);
  }

  /** The runs collection this ledger writes, to share with readers of the history. */
  get documents(): RunDocuments {
    return this.#documents;
  }

  /**
   * Claims run `runId` for a fresh attempt, or reports why it cannot: completed (a duplicate, even
   * past `expire_at`), held by a live lease, or unreadable. One `create()`; on a conflict, a read
   * and, if {@link claimDecision} says so, a takeover fenced on it; lost races re-read, up to
   * {@link MAX_CLAIM_ROUNDS} rounds. A record with this claim's attempt id is ours (a lost answer).
   *
   * @param runId - the idempotency key; the document id (≤ 1500 bytes, no '/').
   * @param guard - a write committed in one atomic batch with the claim's, on its own precondition.
   * @throws {LedgerUnavailableError} if Firestore fails, does not answer in time, or the database
   *   does not exist.
   * @example const result = await ledger.claim(runId, { jobName: 'nightly-report' });
   */
  async claim(
    runId: string,
    details: RunDetails = {},
    guard?: GuardedWrite,
    options: ClaimOptions = {},
  ): Promise<ClaimResult> {
    const held = this.#held.get(runId);
    if (held !== undefined) return { state: 'in_progress', holder: held };
    const pending = this.#claiming.get(runId);
    if (pending !== undefined) {
      const result = await pending;
      return result.state === 'claimed' ? { state: 'in_progress', holder: result.claim } : result;
    }
    const claiming = this.#claimInFirestore(runId, details, guard, options.reopenReported === true);
    this.#claiming.set(runId, claiming);
    try {
      const result = await claiming;
      if (result.state === 'claimed') this.#held.set(runId, result.claim);
      return result;
    } finally {
      this.#claiming.delete(runId);
    }
  }

  async #claimInFirestore(
    runId: string,
    details: RunDetails,
    guard: GuardedWrite | undefined,
    reopenReported: boolean,
  ): Promise<ClaimResult> {
    const documents = this.#documents;
    let holder: Holder | undefined;
    // One attempt id for every round: a record carrying it was written by this claim.
    const attemptId = randomUUID();
    /** The record our last takeover write replaced, if one was sent. */
    let replaced: RunRecord | undefined;
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      const document = claimDocument(attemptId, this.#leaseMs, documents.expireAt(), details);
      const created = await documents.create(runId, 'claim', document, guard);
      if (isGuardChanged(created)) {
        return this.#ownOrGuardChanged(runId, attemptId, created.guardChanged, replaced);
      }
      if (created !== 'exists') return this.#claimed(runId, attemptId, created, undefined);
      const read = await documents.read(runId);
      // A retried write of ours that had landed answers ALREADY_EXISTS or FAILED_PRECONDITION.
      if (isOwn(read.record, attemptId, RunStatus.InProgress) && read.updateTime !== undefined) {
        return this.#claimed(runId, attemptId, read.updateTime, replaced);
      }
      replaced = undefined;
      const decided = claimDecision(read.record, read.readTime, reopenReported);
      if (decided.decision === 'absent') continue; // released between our create and our read
      if (decided.decision === 'completed') return { state: 'completed', record: decided.record };
      if (decided.decision === 'unreadable') return { state: 'unreadable', record: decided.record };
      holder = holderOf(decided.record);
      if (decided.decision === 'lease_live') return { state: 'in_progress', holder };
      if (read.updateTime === undefined) continue;
      replaced = decided.record;
      const update = takeoverUpdate(
        attemptId,
        this.#leaseMs,
        documents.expireAt(),
        details,
        replaced,
      );
      const taken = await documents.update(runId, 'takeover', update, read.updateTime, guard);
      if (isGuardChanged(taken)) {
        return this.#ownOrGuardChanged(runId, attemptId, taken.guardChanged, replaced);
      }
      if (taken !== 'changed') return this.#claimed(runId, attemptId, taken, replaced);
    }
    return { state: 'in_progress', holder };
  }

  /**
   * Extends the lease of a claim this attempt still holds (the heartbeat), fenced: the new lease
   * runs `leaseMs` from the write's server time. Use the returned claim (its new fencing token).
   *
   * @returns the renewed claim, or `lease_lost` when another attempt took the run over.
   * @throws {LedgerUnavailableError} if every try failed transiently; the lease is unchanged.
   * @example if ((await ledger.extend(claim)) === 'lease_lost') controller.abort();
   */
  async extend(claim: Claim): Promise<Claim | 'lease_lost'> {
    return this.#renew(claim, 'lease extension');
  }

  /**
   * Notes `value` under `name` in the run's record (`notes.NAME`) while this attempt holds the run:
   * one fenced write that also extends the lease, like {@link extend}.
   *
   * @returns the renewed claim, or `lease_lost` when another attempt took the run over.
   * @throws {RunOnceError} for a note {@link noteProblem} refuses, or one past the record's bounds
   *   (`notesBoundProblem`), so the completion and the release can always be written;
   *   {@link LedgerUnavailableError} if every try failed transiently.
   * @example const renewed = await ledger.note(claim, 'launch', { name: execution.name });
   */
  async note(claim: Claim, name: string, value: NoteValue): Promise<Claim | 'lease_lost'> {
    const problem = noteProblem(name, value) ?? notesBoundProblem(claim.notes, name, value);
    if (problem !== undefined) throw new RunOnceError(`ctx.note: ${problem}`);
    return this.#renew(claim, 'note', { name, value });
  }

  async #renew(
    claim: Claim,
    what: string,
    note?: { name: string; value: NoteValue },
  ): Promise<Claim | 'lease_lost'> {
    const written = await this.#fencedWrite(claim, what, () =>
      extensionUpdate(this.#leaseMs, this.#documents.expireAt(), note),
    );
    if ('stoppedBy' in written) {
      this.#held.delete(claim.runId);
      return 'lease_lost';
    }
    const renewed: Claim = {
      ...claim,
      ...(note === undefined ? {} : { notes: { ...claim.notes, [note.name]: note.value } }),
      fencingToken: written,
      leaseExpires: new Date(written.toMillis() + this.#leaseMs),
    };
    this.#held.set(claim.runId, renewed);
    return renewed;
  }

  /**
   * Marks the claimed run completed, if this attempt still holds it.
   *
   * @returns `recorded`, or `lease_lost` when another attempt took the run over (the job may then
   *   have run twice).
   * @throws {LedgerUnavailableError} if every try failed transiently; the job's work is done, so
   *   the caller should still answer 2xx.
   * @example if ((await ledger.complete(claim)) === 'lease_lost') logger.warn('lease lost');
   */
  async complete(claim: Claim): Promise<FenceResult> {
    this.#held.delete(claim.runId);
    const written = await this.#fencedWrite(claim, 'completion', () =>
      completionUpdate(this.#documents.expireAt()),
    );
    return fenceResult(written, claim, RunStatus.Completed);
  }

  /**
   * Releases the claim after a failed attempt, if this attempt still holds it: the record becomes
   * `failed` with the error's message (where the guide's sample deletes the claim), so the next
   * delivery claims it at once and the history keeps the failure.
   *
   * @param failure - the error's message only (cut to `MAX_ERROR_LENGTH`); never request data.
   * @param reporter - when no Scheduler retry can follow, stored as `reported_by` with
   *   `reported_at`: the final failure is reported by this one write.
   * @returns `recorded`, or `lease_lost` when another attempt holds the run.
   * @throws {LedgerUnavailableError} if every try failed transiently; the claim then stays until
   *   its lease lapses, and retries get 409 until then.
   * @example await ledger.release(claim, 'billing answered 503');
   */
  async release(claim: Claim, failure = '', reporter?: string): Promise<FenceResult> {
    this.#held.delete(claim.runId);
    const written = await this.#fencedWrite(claim, 'release', () =>
      failureUpdate(failure, this.#documents.expireAt(), reporter),
    );
    return fenceResult(written, claim, RunStatus.Failed);
  }

  /** Firestore's time now (`RunDocuments.serverTime`). @throws {LedgerUnavailableError} */
  serverTime(): Promise<Date> {
    return this.#documents.serverTime();
  }

  /** A guard moved by another claim, or by our own batch whose answer was lost: then the run is ours. */
  #ownOrGuardChanged(
    runId: string,
    attemptId: string,
    run: DocumentRead,
    previous: RunRecord | undefined,
  ): ClaimResult {
    if (isOwn(run.record, attemptId, RunStatus.InProgress) && run.updateTime !== undefined) {
      return this.#claimed(runId, attemptId, run.updateTime, previous);
    }
    return { state: 'guard_changed' };
  }

  #claimed(
    runId: string,
    attemptId: string,
    writeTime: Timestamp,
    previous: RunRecord | undefined,
  ): ClaimResult {
    const leaseMs = this.#leaseMs;
    const claim: Claim = {
      runId,
      attemptId,
      fencingToken: writeTime,
      leaseExpires: new Date(writeTime.toMillis() + leaseMs),
      leaseMs,
      takeover: previous !== undefined,
      notes: previous?.notes ?? {},
      // A takeover keeps a stored first claim (takeoverUpdate); otherwise this write stamped it.
      firstClaimedAt: previous?.firstClaimedAt ?? writeTime.toDate(),
      attempts: (previous?.attempts ?? 0) + 1,
    };
    return { state: 'claimed', claim };
  }

  /**
   * One fenced write with bounded retries. A precondition failure finding our attempt still in
   * progress is an earlier write of ours landed unseen: try again on the update time just read.
   * Safe: only this attempt writes an `in_progress` record with its `attempt_id` (see
   * {@link reportFailure}). Returns the write's time (the new token), or the record that stopped it.
   */
  async #fencedWrite(claim: Claim, what: string, update: () => DocumentData): Promise<Written> {
    let token = claim.fencingToken;
    for (let tries = 1; ; tries++) {
      let written: Timestamp | 'changed';
      try {
        written = await this.#documents.update(claim.runId, what, update(), token);
      } catch (err) {
        if (tries >= FENCED_WRITE_TRIES) throw err;
        await new Promise((r) => setTimeout(r, FENCED_WRITE_BACKOFF_MS * 2 ** (tries - 1)));
        continue;
      }
      if (written !== 'changed') return written;
      const { record, updateTime } = await this.#documents.read(claim.runId);
      const retry =
        isOwn(record, claim.attemptId, RunStatus.InProgress) && updateTime !== undefined;
      if (!retry || tries >= FENCED_WRITE_TRIES) return { stoppedBy: record };
      token = updateTime;
    }
  }
}

/**
 * Marks a run's final failure reported, once across instances (the missed-run check), fenced on
 * `token`, the update time of the read that judged it: a `failed` record gets `reported_at` and
 * `reported_by`; with `lapsedError`, an `in_progress` record whose lease lapsed is ended `failed`
 * too. The one write onto a record by anyone but the attempt it names, and it leaves no record
 * `in_progress`: so an `in_progress` record with an attempt's id was written by that attempt, which
 * claims and fenced writes rely on. A lapsed attempt still running then gets `lease_lost` from its
 * heartbeat and completion; its release finds its own attempt failed and counts as recorded.
 *
 * @param lapsedError - only for a record read `in_progress` whose lease lapsed at the read's time.
 * @returns `reported` if this call marked it, `exists` if the record changed since `token`.
 * @throws {LedgerUnavailableError} if Firestore fails.
 * @example await reportFailure(documents, runId, updateTime, randomUUID());
 */
export async function reportFailure(
  documents: RunDocuments,
  runId: string,
  token: Timestamp,
  reporter: string,
  lapsedError?: string,
): Promise<'reported' | 'exists'> {
  const update =
    lapsedError === undefined
      ? reportedUpdate(reporter)
      : failureUpdate(lapsedError, documents.expireAt(), reporter);
  const marked = await documents.update(runId, 'failed-run report', update, token);
  return marked === 'changed' ? 'exists' : 'reported';
}

function isGuardChanged(written: Timestamp | string | GuardChanged): written is GuardChanged {
  return typeof written === 'object' && 'guardChanged' in written;
}

/** A fenced write's time, or the record (`undefined`: absent) whose change stopped it. */
type Written = Timestamp | { readonly stoppedBy: StoredRecord | undefined };

/** `recorded` if the write landed, or if the record that stopped it is ours and already `done`. */
function fenceResult(written: Written, claim: Claim, done: RunStatus): FenceResult {
  if (!('stoppedBy' in written)) return 'recorded';
  return isOwn(written.stoppedBy, claim.attemptId, done) ? 'recorded' : 'lease_lost';
}

/** Whether `record` is attempt `attemptId`'s, with status `status`. */
function isOwn(
  record: StoredRecord | undefined,
  attemptId: string,
  status: RunStatus,
): record is RunRecord {
  return record !== undefined && record.status === status && record.attemptId === attemptId;
}

function holderOf(record: RunRecord): Holder | undefined {
  return record.leaseExpires === undefined
    ? undefined
    : { attemptId: record.attemptId, leaseExpires: record.leaseExpires };
}
