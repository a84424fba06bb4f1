/**
 * Look before you launch: the step the three proxy examples share (Workflows, Cloud Run jobs,
 * Cloud Build). None of those APIs takes a request id, so a proxy that launched an execution and
 * died before its run's completion write would, on the retry, launch a second one. Here every
 * attempt first asks the API for an execution of its run and adopts it if there is one; only if
 * there is none does it launch.
 *
 * The look relies only on what each API documents: it lists newest first (the documented order),
 * follows the pages, and matches on the client what the proxy itself wrote into the launch (the
 * run id in the argument, an environment override or a substitution). It is bounded by count
 * ({@link LOOK_LIMIT} executions; reaching it without an answer refuses the launch) and ends early
 * only at an execution a day older than the run's first claim ({@link LOOK_MARGIN_MS}): the first
 * claim is Firestore's clock and a creation time the launched API's, and no document bounds the
 * difference, so the comparison is never trusted to within minutes (an API clock six minutes
 * behind, with one newer execution of another run, made a five-minute margin launch twice). No
 * server-side filter alone decides what is found: a filter syntax or a field the reference does
 * not promise could hide the execution, and the retry would launch a second one.
 * The window starts at the first claim, not at the schedule time: a forced run's schedule time is
 * in the future, a re-run's far in the past, and every launch of the run came after its first
 * claim.
 *
 * The rule is "always look", not "look only on a takeover": `ctx` does not say whether the attempt
 * took over an earlier one, and a list call or two per run is cheap next to a launch. What it does not
 * cover: an earlier attempt that is still alive (paused past its lease, a zombie) and launches
 * *after* this attempt looked. The ledger's fencing stops that attempt's completion, not its launch,
 * so the launched service must still de-duplicate on the run id (the guide's downstream
 * idempotency; `examples/cloud-run-job/task.ts` shows it for a Cloud Run job).
 */
import type { JobContext } from '../../src/core/job-context.ts';

/** An execution (or build) of the run: launched by this attempt, or adopted from an earlier one. */
export interface Launch {
  /** Which API: `workflows`, `cloud-run-job` or `cloud-build`. */
  readonly target: string;
  /** The execution's full resource name, e.g. `projects/p/locations/l/jobs/j/executions/j-x7k2p`. */
  readonly name: string;
  /** True when an earlier attempt of this run launched it and this attempt found it instead. */
  readonly adopted: boolean;
}

/**
 * Records a launch in the run's record before the run completes, so people (and tools) can see
 * which execution a run started. Throwing fails the attempt: the claim is released and the retry
 * finds the execution and records it again.
 */
export type RecordLaunch = (
  ctx: JobContext,
  launch: Launch,
) => Promise<void> | void;

/**
 * The default {@link RecordLaunch}: `ctx.note('launch', { target, name, adopted })`, one fenced
 * write of the ledger that lands only while this attempt holds the run (and extends its lease).
 */
export const noteLaunch: RecordLaunch = (ctx, launch) =>
  ctx.note('launch', {
    target: launch.target,
    name: launch.name,
    adopted: launch.adopted,
  });

/** The two calls a target needs for {@link launchOnce}. */
export interface LaunchSteps {
  /** Which API, for the log line and the record. */
  readonly target: string;
  /**
   * The look: the name of an execution that carries this run's id, or `undefined`.
   * @throws when the API fails: the attempt fails and Scheduler retries.
   */
  find(): Promise<string | undefined>;
  /**
   * Starts one execution carrying this run's id; resolves to its name once the API accepted it.
   * @throws when the API refuses or fails.
   */
  launch(): Promise<string>;
}

/**
 * Launches at most one execution per run, as far as this proxy can tell: finds one this run already
 * launched (an earlier attempt that died between its launch and its completion write) and adopts
 * it, else launches. Then logs the launch and records it in the run's record (`notes.launch`).
 *
 * Cost: the look's list calls (one per page of executions since the run's first claim, usually
 * one) on top of the launch (none launched on an adoption).
 *
 * @param ctx - the job's context: the run id, the logger, and the signal checked before launching
 *   (an attempt whose lease was lost must not launch).
 * @param steps - the target's list and launch calls.
 * @param record - how the launch is recorded; {@link noteLaunch} (the run's record) unless given.
 * @returns the launch, `adopted` telling which way it went.
 * @throws whatever `find`, `launch` or `record` throw, and the signal's reason if it aborted before
 *   the launch: the claim is then released and Scheduler retries.
 * @example
 * const launch = await launchOnce(ctx, {
 *   target: 'cloud-run-job',
 *   find: () => findExecution(ctx.runId),
 *   launch: () => runJob(ctx.runId),
 * });
 */
export async function launchOnce(
  ctx: JobContext,
  steps: LaunchSteps,
  record: RecordLaunch = noteLaunch,
): Promise<Launch> {
  const found = await steps.find();
  let launch: Launch;
  if (found === undefined) {
    // A lease lost while we listed belongs to another attempt now: it launches, not us.
    ctx.signal.throwIfAborted();
    launch = {
      target: steps.target,
      name: await steps.launch(),
      adopted: false,
    };
  } else {
    launch = { target: steps.target, name: found, adopted: true };
  }
  ctx.logger.info(
    { target: launch.target, execution: launch.name, adopted: launch.adopted },
    launch.adopted
      ? `${launch.target}: adopted the execution an earlier attempt of this run launched`
      : `${launch.target}: launched one execution for this run`,
  );
  await record(ctx, launch);
  return launch;
}

/**
 * The resource name an API answered with, or a throw: an answer without one cannot be recorded or
 * found again. Throwing after a launch is safe: the retry's look finds the execution and adopts it.
 *
 * @throws Error naming `what` when `name` is missing or empty.
 * @example nameOf(execution.name, 'execution') // 'projects/p/locations/l/workflows/w/executions/…'
 */
export function nameOf(name: string | null | undefined, what: string): string {
  if (typeof name !== 'string' || name === '') {
    throw new Error(`the API's answer carries no name of the ${what}`);
  }
  return name;
}

/**
 * How far before the run's first claim the look reads, ms: a day. The first claim time is
 * Firestore's clock and an execution's creation time the launched API's; no document bounds the
 * difference, so the margin is far beyond any skew seen, and what bounds the look's cost is
 * {@link LOOK_LIMIT}, a count.
 */
export const LOOK_MARGIN_MS = 24 * 3_600_000;

/**
 * The most executions the look reads (about ten pages). A list holding more than this many
 * executions within {@link LOOK_MARGIN_MS} of the run's first claim cannot be read to its end, so
 * the look refuses the launch ({@link LookIncompleteError}) rather than guess.
 */
export const LOOK_LIMIT = 1000;

/**
 * The look could not tell whether this run launched an execution, so the attempt does not
 * launch: it fails, the claim is released and Scheduler retries. `reason` says which: `limit`
 * (more executions in the window than {@link LOOK_LIMIT}), `pending` (an execution that does not
 * show its run id yet).
 */
export class LookIncompleteError extends Error {
  override name = 'LookIncompleteError';
  readonly reason: 'limit' | 'pending';

  constructor(reason: 'limit' | 'pending', message: string) {
    super(message);
    this.reason = reason;
  }
}

/**
 * The start of the look's window: when the run's first attempt claimed it, less `marginMs`.
 * Every launch of this run came after that claim, by Firestore's clock.
 *
 * @param marginMs - ms to allow for the launched API's clock running behind Firestore's.
 * @example lookSince(ctx) // ctx.firstClaimedAt − 24 h
 */
export function lookSince(
  ctx: Pick<JobContext, 'firstClaimedAt'>,
  marginMs = LOOK_MARGIN_MS,
): Date {
  return new Date(ctx.firstClaimedAt.getTime() - marginMs);
}

/** A `google.protobuf.Timestamp` as the Node clients decode it (seconds may be a Long or string). */
export interface ProtoTimestamp {
  readonly seconds?: number | string | { toString(): string } | null;
  readonly nanos?: number | null;
}

/**
 * A protobuf timestamp as a `Date` (ms precision), or `undefined` when absent.
 *
 * @example timestampToDate({ seconds: '1792152000', nanos: 5e8 }) // 2026-10-16T12:00:00.500Z
 */
export function timestampToDate(
  t: ProtoTimestamp | null | undefined,
): Date | undefined {
  if (t?.seconds === undefined || t.seconds === null) {
    return undefined;
  }
  const seconds = Number(
    typeof t.seconds === 'object' ? t.seconds.toString() : t.seconds,
  );
  if (!Number.isFinite(seconds)) {
    return undefined;
  }
  return new Date(seconds * 1000 + Math.floor((t.nanos ?? 0) / 1e6));
}

/**
 * The call options of a client's `list…Async`: it fetches the next page (`next_page_token`) only
 * when the previous one is read, and google-gax warns unless `autoPaginate` is false
 * ("Autopaginate will always be set to false in Async paging methods",
 * https://github.com/googleapis/gax-nodejs/blob/main/client-libraries.md#auto-pagination).
 */
export const NEXT_PAGE_ON_DEMAND = { autoPaginate: false } as const;

/** What {@link findSince} needs to read a newest-first list. */
export interface NewestFirst<T> {
  /** When the item was created (or started), by the API's clock; `undefined` if not given. */
  time(item: T): Date | undefined;
  /** True for an item that carries this run's id, as the proxy wrote it. */
  matches(item: T): boolean;
  /**
   * True for an item that may be this run's but does not show a run id yet (a Cloud Run
   * execution before its overrides show); when nothing matches, such an item refuses the launch.
   */
  pending?(item: T): boolean;
}

/**
 * Reads a list that the API documents as newest first, page after page, and returns the first
 * item that matches; it stops at the first item older than `since` (all later ones are older
 * still), or at the list's end. An item without a time does not stop the scan: the order says
 * nothing about it.
 *
 * @param items - the list, e.g. a client's `list…Async(request)`, which fetches the next page
 *   (`next_page_token`) only when the previous one is read.
 * @param since - the window's start, {@link lookSince}.
 * @param limit - the most items read, {@link LOOK_LIMIT} unless given.
 * @throws {LookIncompleteError} when `limit` items were read without a match or the window's
 *   end, or nothing matched and an item was {@link NewestFirst.pending}; whatever the list throws
 *   (an API failure). Either way the attempt fails, launches nothing, and Scheduler retries.
 * @example
 * const found = await findSince(client.listExecutionsAsync({ parent }), lookSince(ctx), {
 *   time: (e) => timestampToDate(e.createTime),
 *   matches: (e) => runIdOf(e) === ctx.runId,
 * });
 */
export async function findSince<T>(
  items: AsyncIterable<T>,
  since: Date,
  read: NewestFirst<T>,
  limit = LOOK_LIMIT,
): Promise<T | undefined> {
  let count = 0;
  let pending: T | undefined;
  const verdict = () => {
    if (pending === undefined) {
      return undefined;
    }
    throw new LookIncompleteError(
      'pending',
      "the look found an execution that does not show a run id yet (it may be this run's, launched by an earlier attempt); not launching, the retry looks again",
    );
  };
  for await (const item of items) {
    if (read.matches(item)) {
      return item;
    }
    if (pending === undefined && read.pending?.(item) === true) {
      pending = item;
    }
    const time = read.time(item);
    if (time !== undefined && time.getTime() < since.getTime()) {
      return verdict();
    }
    if (++count >= limit) {
      throw new LookIncompleteError(
        'limit',
        `the look read ${limit} executions, all within a day of this run's first claim, without finding this run's: it cannot tell whether an earlier attempt launched one, so it does not launch (give the job a target of its own)`,
      );
    }
  }
  return verdict();
}
