/** The lease protocol, every write fenced (docs/how-it-works.md, "The run ledger in detail"). */
import { randomUUID } from 'node:crypto';
import type {
  DocumentData,
  Firestore,
  Timestamp,
} from '@google-cloud/firestore';
import { LedgerUnavailableError, RunOnceError } from './errors.ts';
import {
  type Note,
  type NoteValue,
  noteProblem,
  notesBoundProblem,
} from './notes.ts';
import { rememberBounded } from './recent-runs.ts';
import {
  claimFields,
  completionUpdate,
  extensionUpdate,
  failureUpdate,
  reportedUpdate,
} from './record-writes.ts';
import {
  type DocumentRead,
  type GuardChanged,
  type GuardedWrite,
  RunDocuments,
  type RunDocumentsOptions,
} from './run-documents.ts';
import {
  type ClaimDecision,
  claimDecision,
  Field,
  type RunDetails,
  type RunRecord,
  RunStatus,
  type StoredRecord,
  type UnreadableRecord,
} from './run-record.ts';

/** A claim held by this attempt. Times are Firestore's. */
export interface Claim {
  /** The idempotency key: the document id, and the token to pass to downstream services. */
  readonly runId: string;
  /** This attempt's id (a UUID), stored as the record's `attempt_id`. */
  readonly attemptId: string;
  /** Update time of our last write to the run document: the fencing token of every later write. */
  readonly fencingToken: Timestamp;
  /** When the lease lapses: our last write's time + `leaseMs`. */
  readonly leaseExpires: Date;
  /**
   * The lease our last write set, ms: a claim's short one (`claimLeaseMs`) until the first
   * extension widens it to `leaseMs`. The heartbeat beats at a third of it.
   */
  readonly leaseMs: number;
  /** True when this claim took over an earlier attempt's record (a lapsed lease, a failure). */
  readonly takeover: boolean;
  /** The notes stored in the record: exact, since only the holder writes notes (fenced). */
  readonly notes: Readonly<Record<string, NoteValue>>;
  /** When the run's first attempt claimed it (`first_claimed_at`). */
  readonly firstClaimedAt: Date;
  /** How many attempts claimed the run, this one included (`attempts`). */
  readonly attempts: number;
}

/** The attempt holding a run, as far as a claim could tell. */
export type Holder = Pick<Claim, 'attemptId' | 'leaseExpires'>;

/** What a claim found; `holder` is unknown when lost races left no record to read. */
export type ClaimResult =
  | { readonly state: 'claimed'; readonly claim: Claim }
  | { readonly state: 'guard_changed' }
  | { readonly state: 'completed'; readonly record: RunRecord }
  | { readonly state: 'in_progress'; readonly holder: Holder | undefined }
  | { readonly state: 'unreadable'; readonly record: UnreadableRecord };

/** A fenced write `recorded` (or an earlier try of ours had), or `lease_lost`: it changed nothing. */
export type FenceResult = 'recorded' | 'lease_lost';

/** What `runOnce` needs of a ledger: {@link RunLedger}, or the bench's baselines. */
export type Ledger = Pick<
  RunLedger,
  'claim' | 'extend' | 'note' | 'complete' | 'release'
> &
  Partial<Pick<RunLedger, 'holds'>>;

/** Ledger settings, ms. */
export interface LedgerOptions {
  /** The lease an extension writes (LEASE_SECONDS × 1000): it outlasts the attempt's work. */
  readonly leaseMs: number;
  /**
   * The lease a claim writes, at most `leaseMs`; default {@link CLAIM_LEASE_TIMEOUTS} Firestore
   * timeouts. Short, so a claim whose answer never came strands its run for seconds, not a lease.
   */
  readonly claimLeaseMs?: number;
}

/**
 * A claim's lease, in Firestore timeouts: its holder learns that the claim landed within one timeout
 * and widens it at the first beat (a third of it), leaving a timeout for that write to land.
 */
export const CLAIM_LEASE_TIMEOUTS = 3;

/** What the claim rounds of one claim share: the claim asked for, and what its rounds learned. */
interface ClaimRounds {
  readonly runId: string;
  readonly attemptId: string;
  readonly details: RunDetails;
  readonly guard: GuardedWrite | undefined;
  readonly reopenReported: boolean;
  /** The holder the last read found, if any. */
  holder: Holder | undefined;
  /** The record our last takeover write replaced, if one was sent. */
  replaced: RunRecord | undefined;
}

/** A record to take over, fenced on the update time of the read that found it. */
interface ClaimTakeover {
  readonly state: 'take_over';
  readonly record: RunRecord;
  readonly fencingToken: Timestamp;
}

/** How often a claim re-reads after losing a race before reporting the run as in progress. */
const MAX_CLAIM_ROUNDS = 4;
/** Tries of a fenced write whose failure looks transient, and the first back-off. */
const FENCED_WRITE_TRIES = 3;
const FENCED_WRITE_BACKOFF_MS = 200;

/**
 * The ledger on Firestore, safe to share across requests. Single flight per instance: while it holds
 * or is claiming a run, claims of it answer `in_progress` without a Firestore call.
 */
export class RunLedger {
  readonly #documents: RunDocuments;
  readonly #leaseMs: number;
  /** Claims sent to Firestore and not yet answered, by run id. */
  readonly #claiming = new Map<string, Promise<ClaimResult>>();
  /** Runs this instance holds (claimed, not completed or released). */
  readonly #held = new Map<string, Holder>();
  /** The lease a claim writes, ms ({@link LedgerOptions.claimLeaseMs}). */
  readonly #claimLeaseMs: number;
  /**
   * Attempts of this instance whose claim or release went unanswered, by run id: a record still
   * held by one of them holds nothing, since no work of this instance runs under it.
   */
  readonly #unanswered = new Map<string, Set<string>>();
  /**
   * Attempts of this instance whose work returned but whose completion went unrecorded, by run id:
   * a later claim here that finds one still holding the record records the completion instead.
   */
  readonly #unrecordedCompletions = new Map<string, string>();

  constructor(documents: RunDocuments, options: LedgerOptions) {
    this.#documents = documents;
    this.#leaseMs = options.leaseMs;
    const claimLeaseMs =
      options.claimLeaseMs ?? CLAIM_LEASE_TIMEOUTS * documents.timeoutMs;
    this.#claimLeaseMs = Math.min(options.leaseMs, claimLeaseMs);
  }
  /** A ledger on its own {@link RunDocuments} over `db`. */
  static open(
    db: Firestore,
    options: LedgerOptions & RunDocumentsOptions,
  ): RunLedger {
    return new RunLedger(new RunDocuments(db, options), options);
  }
  /** Whether an attempt of this instance holds `runId` now: claimed, not yet completed or released. */
  holds(runId: string): boolean {
    return this.#held.has(runId);
  }
  /** The runs collection this ledger writes, to share with readers of the history. */
  get documents(): RunDocuments {
    return this.#documents;
  }
  /**
   * Claims `runId` for a fresh attempt, or says why not (`completed`: a duplicate, even past
   * `expire_at`). With `guard`, the claim's write and the guarded one land in one atomic batch or
   * neither does (`guard_changed`); `reopenReported` takes over a run reported missed or finally
   * failed (a backfill). @throws {RunOnceError} for a run id Firestore cannot take as a document id,
   * before any call; {@link LedgerUnavailableError} if Firestore fails, is late, or has no database.
   */
  async claim(
    runId: string,
    details: RunDetails = {},
    guard?: GuardedWrite,
    options: { readonly reopenReported?: boolean } = {},
  ): Promise<ClaimResult> {
    const problem = runIdProblem(runId);
    if (problem !== undefined) {
      throw new RunOnceError(
        `run id ${JSON.stringify(runId.slice(0, 80))}: ${problem}`,
      );
    }
    const held = this.#held.get(runId);
    if (held !== undefined) {
      return { state: 'in_progress', holder: held };
    }
    const pending = this.#claiming.get(runId);
    if (pending !== undefined) {
      const result = await pending;
      return result.state === 'claimed'
        ? { state: 'in_progress', holder: result.claim }
        : result;
    }
    // One attempt id for every round: a record carrying it was written by this claim.
    const attemptId = randomUUID();
    const reopen = options.reopenReported === true;
    const claiming = this.#claimInFirestore(
      runId,
      attemptId,
      details,
      guard,
      reopen,
    );
    this.#claiming.set(runId, claiming);
    try {
      const result = await claiming;
      if (result.state === 'claimed') {
        this.#held.set(runId, result.claim);
      }
      if (result.state === 'claimed' || result.state === 'completed') {
        this.#unanswered.delete(runId);
      }
      return result;
    } catch (error) {
      // Its write may have landed unanswered: a later claim here takes that record over at once.
      this.#rememberUnanswered(runId, attemptId);
      throw error;
    } finally {
      this.#claiming.delete(runId);
    }
  }
  /** One `create()`; on a conflict, a read and a takeover fenced on it; lost races re-read. */
  async #claimInFirestore(
    runId: string,
    attemptId: string,
    details: RunDetails,
    guard: GuardedWrite | undefined,
    reopenReported: boolean,
  ): Promise<ClaimResult> {
    const rounds: ClaimRounds = {
      runId,
      attemptId,
      details,
      guard,
      reopenReported,
      holder: undefined,
      replaced: undefined,
    };
    for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
      const created = await this.#createClaim(rounds);
      if (created !== 'conflict') {
        return created;
      }
      const read = await this.#documents.read(runId);
      const settled = await this.#settleConflict(rounds, read);
      if (settled === 'next_round') {
        continue;
      }
      if (settled.state !== 'take_over') {
        return settled;
      }
      const taken = await this.#takeOver(rounds, settled);
      if (taken !== 'conflict') {
        return taken;
      }
    }
    return { state: 'in_progress', holder: rounds.holder };
  }
  /** The claim's `create()`: our claim, `guard_changed`, or `conflict` when a record is there. */
  async #createClaim(rounds: ClaimRounds): Promise<ClaimResult | 'conflict'> {
    const { runId, attemptId } = rounds;
    const created = await this.#documents.writeWith(
      runId,
      'claim',
      this.#claimFields(attemptId, rounds.details),
      undefined,
      rounds.guard,
    );
    if (isGuardChanged(created)) {
      return (
        this.#ours(runId, attemptId, created.guardChanged, rounds.replaced) ??
        GUARD_CHANGED
      );
    }
    if (created !== 'conflict') {
      return this.#claimed(runId, attemptId, created);
    }
    return 'conflict';
  }
  /**
   * What the read after a lost `create()` settles: our own claim, a completion recorded here, the
   * record's answer (completed, unreadable, a live lease's holder), `next_round`, or a takeover.
   */
  async #settleConflict(
    rounds: ClaimRounds,
    read: DocumentRead,
  ): Promise<ClaimResult | ClaimTakeover | 'next_round'> {
    const { runId, attemptId } = rounds;
    const own = this.#ours(runId, attemptId, read, rounds.replaced);
    if (own !== undefined) {
      return own;
    }
    const completed = await this.#completeUnrecorded(runId, read);
    if (completed === 'conflict') {
      return 'next_round';
    }
    if (completed !== undefined) {
      return { state: 'completed', record: completed };
    }
    rounds.replaced = undefined;
    const decided = this.#isUnanswered(runId, read.record)
      ? ({ decision: 'take_over', record: read.record } as const)
      : claimDecision(read.record, read.readTime, rounds.reopenReported);
    if (decided.decision === 'absent') {
      return 'next_round'; // released between our create and our read
    }
    const settled = settledClaim(decided);
    if (settled.state !== 'take_over') {
      return settled;
    }
    rounds.holder = holderOf(settled.record);
    if (read.updateTime === undefined) {
      return 'next_round';
    }
    return { ...settled, fencingToken: read.updateTime };
  }
  /** The takeover write, fenced on the read: our claim, `guard_changed`, or `conflict`. */
  async #takeOver(
    rounds: ClaimRounds,
    takeover: ClaimTakeover,
  ): Promise<ClaimResult | 'conflict'> {
    const { runId, attemptId } = rounds;
    const replaced = takeover.record;
    rounds.replaced = replaced;
    const update = this.#claimFields(attemptId, rounds.details, replaced);
    const taken = await this.#documents.writeWith(
      runId,
      'takeover',
      update,
      takeover.fencingToken,
      rounds.guard,
    );
    if (isGuardChanged(taken)) {
      return (
        this.#ours(runId, attemptId, taken.guardChanged, replaced) ??
        GUARD_CHANGED
      );
    }
    if (taken !== 'conflict') {
      return this.#claimed(runId, attemptId, taken, replaced);
    }
    return 'conflict';
  }
  /**
   * Our claim, if `read` found our attempt in progress: a retried write of ours that had landed
   * answers as a conflict.
   */
  #ours(
    runId: string,
    attemptId: string,
    read: DocumentRead,
    previous: RunRecord | undefined,
  ) {
    return isOwn(attemptId, RunStatus.InProgress, read.record) &&
      read.updateTime !== undefined
      ? this.#claimed(runId, attemptId, read.updateTime, previous)
      : undefined;
  }
  /** The fields of a claim (or a takeover of `previous`) by `attemptId`, under a new lease. */
  #claimFields(attemptId: string, details: RunDetails, previous?: RunRecord) {
    return claimFields(
      attemptId,
      this.#claimLeaseMs,
      this.#documents.expireAt(),
      details,
      previous,
    );
  }
  /**
   * Extends the lease to `leaseMs` from the write's server time: the renewed claim (its new fencing
   * token), or `lease_lost`. @throws {LedgerUnavailableError} if every try failed transiently.
   */
  extend(claim: Claim): Promise<Claim | 'lease_lost'> {
    return this.#renew(claim, 'lease extension');
  }
  /**
   * Notes `value` under `name` (`notes.NAME`) in one fenced write that also extends the lease.
   * @throws {RunOnceError} for a note `noteProblem` or `notesBoundProblem` refuses;
   *   {@link LedgerUnavailableError} if every try failed transiently.
   */
  async note(
    claim: Claim,
    name: string,
    value: NoteValue,
  ): Promise<Claim | 'lease_lost'> {
    const problem =
      noteProblem(name, value) ?? notesBoundProblem(claim.notes, name, value);
    if (problem !== undefined) {
      throw new RunOnceError(`ctx.note: ${problem}`);
    }
    return this.#renew(claim, 'note', { name, value });
  }
  /** A fenced extension (with `note`, if given): the renewed claim, or `lease_lost` (no longer held). */
  async #renew(
    claim: Claim,
    what: string,
    note?: Note,
  ): Promise<Claim | 'lease_lost'> {
    const written = await this.#fencedWrite(claim, what, () =>
      extensionUpdate(this.#leaseMs, this.#documents.expireAt(), note),
    );
    if (typeof written === 'string') {
      this.#held.delete(claim.runId);
      return 'lease_lost';
    }
    const renewed: Claim = {
      ...claim,
      ...(note === undefined
        ? {}
        : { notes: { ...claim.notes, [note.name]: note.value } }),
      fencingToken: written,
      leaseExpires: new Date(written.toMillis() + this.#leaseMs),
      leaseMs: this.#leaseMs,
    };
    this.#held.set(claim.runId, renewed);
    return renewed;
  }
  /**
   * Marks the run completed: `lease_lost` if another attempt took it over (the job may have run twice).
   * @throws {LedgerUnavailableError} if every try failed transiently (the work is done: answer 2xx).
   */
  async complete(claim: Claim): Promise<FenceResult> {
    const update = () => completionUpdate(this.#documents.expireAt());
    try {
      return await this.#finish(claim, 'completion', update);
    } catch (error) {
      // The work is done: a later claim here records the completion instead of running it again.
      rememberBounded(
        this.#unrecordedCompletions,
        claim.runId,
        claim.attemptId,
      );
      throw error;
    }
  }
  /**
   * Releases the claim after a failed attempt: `failed` with `failure` (the error's message only, cut
   * to `MAX_ERROR_LENGTH`), which the next delivery claims at once; with `reporter` (no retry can
   * follow), the same write reports the final failure. @throws {LedgerUnavailableError} if every try
   * failed transiently: the claim then stays until its lease lapses (retries get 409), except
   * to a later claim by this ledger, which takes it over at once.
   */
  async release(
    claim: Claim,
    failure = '',
    reporter?: string,
  ): Promise<FenceResult> {
    const update = () =>
      failureUpdate(failure, this.#documents.expireAt(), reporter);
    try {
      return await this.#finish(claim, 'release', update);
    } catch (error) {
      // The work has stopped: a retry here need not wait for the lease of a release never answered.
      this.#rememberUnanswered(claim.runId, claim.attemptId);
      throw error;
    }
  }
  /** The fenced write that ends our hold of the run (a completion or a release). */
  async #finish(
    claim: Claim,
    what: string,
    update: () => DocumentData,
  ): Promise<FenceResult> {
    try {
      const written = await this.#fencedWrite(claim, what, update);
      return written === 'lease_lost' ? written : 'recorded';
    } finally {
      // Held until the write settles: a delivery here meanwhile answers in_progress.
      this.#held.delete(claim.runId);
    }
  }
  /** The claim a landed write of `attemptId` makes: a takeover of `previous` if given. */
  #claimed(
    runId: string,
    attemptId: string,
    writeTime: Timestamp,
    previous?: RunRecord,
  ) {
    const claim: Claim = {
      runId,
      attemptId,
      fencingToken: writeTime,
      leaseExpires: new Date(writeTime.toMillis() + this.#claimLeaseMs),
      leaseMs: this.#claimLeaseMs,
      takeover: previous !== undefined,
      notes: previous?.notes ?? {},
      // A takeover keeps a stored first claim (claimFields); otherwise this write stamped it.
      firstClaimedAt: previous?.firstClaimedAt ?? writeTime.toDate(),
      attempts: (previous?.attempts ?? 0) + 1,
    };
    return { state: 'claimed', claim } as const;
  }
  /** Remembers that `attemptId`'s write to `runId` went unanswered (bounded: oldest runs first out). */
  #rememberUnanswered(runId: string, attemptId: string): void {
    const attempts = this.#unanswered.get(runId) ?? new Set<string>();
    attempts.add(attemptId);
    rememberBounded(this.#unanswered, runId, attempts);
  }
  /**
   * Records the completion of a run whose work an attempt of this instance finished but could not
   * record, when `read` finds that attempt still holding it: the run's record as completed, or
   * `conflict` if the record changed since the read.
   */
  async #completeUnrecorded(
    runId: string,
    read: DocumentRead,
  ): Promise<RunRecord | 'conflict' | undefined> {
    const { record, updateTime } = read;
    const attemptId = this.#unrecordedCompletions.get(runId);
    if (attemptId === undefined || updateTime === undefined) {
      return undefined;
    }
    if (!isOwn(attemptId, RunStatus.InProgress, record)) {
      return undefined;
    }
    const update = completionUpdate(this.#documents.expireAt());
    const written = await this.#documents.write(
      runId,
      'completion',
      update,
      updateTime,
    );
    if (written === 'conflict') {
      return written;
    }
    this.#unrecordedCompletions.delete(runId);
    const completedAt = written.toDate();
    return {
      ...record,
      status: RunStatus.Completed,
      leaseExpires: undefined,
      completedAt,
    };
  }
  /** The record is in progress under an attempt of this instance whose claim or release went unanswered. */
  #isUnanswered(
    runId: string,
    record: StoredRecord | undefined,
  ): record is RunRecord {
    const attempts = this.#unanswered.get(runId);
    if (attempts === undefined || record === undefined) {
      return false;
    }
    return (
      record.status === RunStatus.InProgress && attempts.has(record.attemptId)
    );
  }
  /**
   * One fenced write with bounded retries: its time (the new token); stopped by a changed record,
   * `recorded` if it is our attempt in the status this write sets (an earlier try landed), else
   * `lease_lost`. Our attempt still `in_progress` at a newer update time is a write of ours landed
   * unseen: retry on it (why that is safe: docs/how-it-works.md, "Writes: one precondition each").
   */
  async #fencedWrite(claim: Claim, what: string, update: () => DocumentData) {
    let token = claim.fencingToken;
    for (let tries = 1; ; tries++) {
      const data = update();
      let written: Timestamp | 'conflict';
      try {
        written = await this.#documents.write(claim.runId, what, data, token);
      } catch (err) {
        if (tries >= FENCED_WRITE_TRIES) {
          throw err;
        }
        await new Promise((r) =>
          setTimeout(r, FENCED_WRITE_BACKOFF_MS * 2 ** (tries - 1)),
        );
        continue;
      }
      if (written !== 'conflict') {
        return written;
      }
      const { record, updateTime } = await this.#documents.read(claim.runId);
      const stillOurs =
        isOwn(claim.attemptId, RunStatus.InProgress, record) &&
        updateTime !== undefined;
      if (!stillOurs) {
        const landedBefore =
          isOwn(claim.attemptId, data[Field.status], record) ||
          releasedBefore(claim, data, record);
        return landedBefore ? 'recorded' : 'lease_lost';
      }
      if (tries >= FENCED_WRITE_TRIES) {
        // Our own writes kept landing unanswered: the lease is still ours, the write not done.
        throw new LedgerUnavailableError(
          `the ${what} of run ${claim.runId} met this attempt's own writes, answered late, ${tries} times`,
        );
      }
      token = updateTime;
    }
  }
}

/**
 * Marks a run's final failure reported (the missed-run check), fenced on `token` from the read that
 * judged it: the write's time, or `exists` if the record changed since. With `lapsedError`, a lapsed
 * `in_progress` record is ended `failed` too: the one write to a run record by anyone but the
 * record's attempt, safe because it is fenced on the read that found the lease lapsed (a beat that
 * landed since changes the record's update time, and the write then finds `exists`).
 * @throws {LedgerUnavailableError} if Firestore fails.
 */
export async function reportFailure(
  documents: RunDocuments,
  runId: string,
  token: Timestamp,
  reporter: string,
  lapsedError?: string,
): Promise<Timestamp | 'exists'> {
  const update =
    lapsedError === undefined
      ? reportedUpdate(reporter)
      : failureUpdate(lapsedError, documents.expireAt(), reporter);
  const marked = await documents.write(
    runId,
    'failed-run report',
    update,
    token,
  );
  return marked === 'conflict' ? 'exists' : marked;
}

const GUARD_CHANGED = { state: 'guard_changed' } as const satisfies ClaimResult;

function isGuardChanged(
  written: Timestamp | string | GuardChanged,
): written is GuardChanged {
  return typeof written === 'object' && 'guardChanged' in written;
}

function isOwn(
  attemptId: string,
  status: RunStatus,
  record?: StoredRecord,
): record is RunRecord {
  return (
    record !== undefined &&
    record.status === status &&
    record.attemptId === attemptId
  );
}

/**
 * Whether `release` (the update of `claim`'s release) landed before another attempt claimed the
 * run: the record, now that attempt's, was claimed right after `claim` (one more attempt), keeps
 * the release's error (`last_error`; a claim leaves it) with a `failed_at` later than `claim`'s
 * last lease write (only this attempt's release, the missed-run check ending a lapsed lease with
 * its own error, or the release of an attempt that took the run over writes one), and its claim
 * (`claimed_at`; all three are server times) tells a retry's from a takeover's:
 *
 * - made while `claim`'s lease was still live: no writer takes over a live lease
 *   (`claimDecision`), so the claim is a retry's of the run this release failed;
 * - or made after that `failed_at`: the holder claimed a run already failed, and the failure is
 *   this release's, which may have landed after the lease ended (a job that ran past it): it
 *   landed all the same, so no takeover came before it (found by invariant 50 of the simulator,
 *   `--seed=2 --path 33 --faults`).
 *
 * An attempt that took over the lapsed lease claimed after the lease and before its own release's
 * `failed_at`: its failure is not taken for this one's, even with the same error. Never for a
 * completion: no attempt claims a completed run.
 */
function releasedBefore(
  claim: Claim,
  release: DocumentData,
  record?: StoredRecord,
): boolean {
  if (record === undefined || record.status === 'unreadable') {
    return false;
  }
  if (release[Field.status] !== RunStatus.Failed) {
    return false;
  }
  const { claimedAt, failedAt } = record;
  return (
    record.attemptId !== claim.attemptId &&
    record.attempts === claim.attempts + 1 &&
    record.lastError === release[Field.lastError] &&
    failedAt !== undefined &&
    failedAt.getTime() > claim.fencingToken.toMillis() &&
    claimedAt !== undefined &&
    (claimedAt.getTime() < claim.leaseExpires.getTime() ||
      claimedAt.getTime() > failedAt.getTime())
  );
}

/** Why Firestore cannot take `id` as a document id (its documented rules), or `undefined`. */
function runIdProblem(id: string): string | undefined {
  if (
    id === '' ||
    id === '.' ||
    id === '..' ||
    id.includes('/') ||
    /^__.*__$/.test(id)
  ) {
    return "Firestore's document ids are not empty, . or .., have no '/' and are not __…__ (reserved)";
  }
  return Buffer.byteLength(id) > 1500
    ? 'a document id is at most 1500 bytes'
    : undefined;
}

/**
 * What a claim that read `decided` (a record there) answers at once: the completed or unreadable
 * record, or the live lease's holder; `take_over` with the record to take over.
 */
function settledClaim(
  decided: Exclude<ClaimDecision, { decision: 'absent' }>,
): ClaimResult | { readonly state: 'take_over'; readonly record: RunRecord } {
  if (decided.decision === 'completed') {
    return { state: 'completed', record: decided.record };
  }
  if (decided.decision === 'unreadable') {
    return { state: 'unreadable', record: decided.record };
  }
  if (decided.decision === 'lease_live') {
    return { state: 'in_progress', holder: holderOf(decided.record) };
  }
  return { state: 'take_over', record: decided.record };
}

/** The attempt holding `record` and when its lease expires; unknown without a lease. */
function holderOf(record: RunRecord): Holder | undefined {
  const { attemptId, leaseExpires } = record;
  return leaseExpires === undefined ? undefined : { attemptId, leaseExpires };
}
