/**
 * Queries of the runs collection that only the operations commands make. The function reads slots
 * by run id and queries nothing.
 */
import type { RunDocuments } from '../src/core/run-documents.ts';
import { Field, RunKind, type StoredRecord } from '../src/core/run-record.ts';

/**
 * The records of runs that are not a slot's (manual and forced runs, re-runs), at most `limit`: one query on
 * the single field `run_kind` (Firestore's automatic single-field index; no composite index).
 *
 * @throws {LedgerUnavailableError} if Firestore fails.
 * @example const runs = await runsOutsideSlots(documents, 200);
 */
export async function runsOutsideSlots(
  documents: RunDocuments,
  limit = 500,
): Promise<{ runId: string; record: StoredRecord }[]> {
  return documents.query((runs) =>
    runs.where(Field.kind, 'in', [RunKind.Manual, RunKind.Forced, RunKind.Rerun]).limit(limit),
  );
}
