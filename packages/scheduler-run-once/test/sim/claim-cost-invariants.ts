/**
 * Invariant 48: a claim that landed as a create and was answered in time costs no read of its
 * run's record. Cost per run is part of the product: a processed run costs its claim and its
 * completion (docs/performance.md), and a delivery whose `create()` came back in time has nothing
 * to learn from reading the record it just wrote. A read there (a claim loop that reads after its
 * own create, a settled conflict that was none) is a Firestore read on every run, invisible to
 * every other invariant because the run still runs once.
 *
 * Judged per execution, on the request that started it: its first create (or batch commit) of the
 * run's record met no fault, landed (the first write to land on the record after it was sent is
 * its instance's, and the record had none before, and the request sent no other create of it
 * before that write landed: a guarded create whose lock changed fails, reads, and creates again),
 * and the request sent no `get` of that record between the create and the job's start. Memory
 * store only (the emulator's outcomes carry no operations).
 */
import type { DeliveryOp, Execution, SimOutcome } from './simulator.ts';

/** The status a claim's create writes: the run's record, held by the claiming attempt. */
const CLAIMED_STATUS = 'in_progress';

/** Operations that read documents by path. */
const READS = new Set<DeliveryOp['kind']>(['get', 'getAll']);

/** Operations a claim's record is created by: alone, or with its overlap lock in one batch. */
const CREATES = new Set<DeliveryOp['kind']>(['create', 'commit']);

/** Invariant 48 over every execution of the history. */
export function claimsCostNoRead(outcome: SimOutcome): string[] {
  const writes = outcome.recordWrites;
  if (outcome.emulator || writes === undefined) {
    return [];
  }
  const found: string[] = [];
  for (const e of outcome.executions) {
    const read = readAfterOwnCreate(outcome, e);
    if (read !== undefined) {
      found.push(
        `invariant 48: ${e.jobId}@${new Date(e.scheduleTime).toISOString()} on ${e.instance} read its run's record at ${new Date(read.at).toISOString()}, after its own create landed and was answered in time: a read on every run`,
      );
    }
  }
  return found;
}

/** The read the request of `e` sent between its landed, untroubled create and the job's start. */
function readAfterOwnCreate(
  outcome: SimOutcome,
  e: Execution,
): DeliveryOp | undefined {
  const delivery = outcome.deliveries.find((d) => d.ranAs === e.attemptId);
  const ops = delivery?.ops ?? [];
  const onRecord = (op: DeliveryOp) =>
    op.paths.some((path) => path.endsWith(`/${e.runId}`));
  const claim = ops.find(
    (op) => CREATES.has(op.kind) && onRecord(op) && op.at <= e.start,
  );
  if (delivery === undefined || claim === undefined || claim.troubled) {
    return undefined;
  }
  const writes = outcome.recordWrites ?? [];
  const before = writes.filter((w) => w.runId === e.runId && w.at < claim.at);
  const last = before.at(-1);
  if (last !== undefined && last.status !== undefined) {
    return undefined; // the record existed: a takeover's path, which reads by design
  }
  const landed = writes.find((w) => w.runId === e.runId && w.at >= claim.at);
  if (
    landed?.machine !== delivery.instance ||
    landed.status !== CLAIMED_STATUS
  ) {
    // Another request's write came first, on another instance or on this one (its missed-run
    // check's `missed` record, say): the create met a conflict.
    return undefined;
  }
  const sentAgain = ops.some(
    (op) =>
      CREATES.has(op.kind) &&
      onRecord(op) &&
      op.at > claim.at &&
      op.at <= landed.at,
  );
  if (sentAgain) {
    return undefined; // its first create may have failed (the lock changed): a later one landed
  }
  return ops.find(
    (op) =>
      READS.has(op.kind) && onRecord(op) && op.at > claim.at && op.at < e.start,
  );
}
