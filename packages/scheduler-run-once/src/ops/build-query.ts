/**
 * Builds the queries of the runs collection from their specs (`indexes.ts`): the one place in the
 * code that calls `where` and `orderBy`, so every query filters and orders as the composite index
 * `deploy.sh` creates for it (`test/unit/indexes.test.ts` checks both).
 */
import { FieldPath, type Query, type Timestamp } from '@google-cloud/firestore';
import { RunKind } from '../core/run-fields.ts';
import type { QuerySpec } from './indexes.ts';

/** Values for a spec's equality fields: one value (`==`) or a list (`in`), in the spec's order. */
export type Equalities = readonly (string | readonly string[])[];

/** Where a page starts: after this record (its ordered field's value and its document id). */
export interface PageCursor {
  readonly value: Timestamp;
  readonly runId: string;
}

/**
 * Builds the query of `spec` on `collection`: its equality filters with `values`, a range on its
 * ordered field (`from` ≤ value ≤ `to`, either optional), ordered by that field then by document
 * id (a stable order for pages: several records may share a schedule time), after `cursor`, at most
 * `limit` documents.
 *
 * @throws {Error} if `values` does not give one value per equality field.
 * @example buildQuery(runs, QUERIES.recordsOfJob, ['nightly-report'], { limit: 100 })
 */
export function buildQuery<T>(
  collection: Query<T>,
  spec: QuerySpec,
  values: Equalities,
  page: {
    from?: Timestamp;
    to?: Timestamp;
    cursor?: PageCursor;
    limit: number;
  },
): Query<T> {
  if (values.length !== spec.equality.length) {
    throw new Error(
      `${spec.purpose}: ${spec.equality.length} values needed, got ${values.length}`,
    );
  }
  let query = collection;
  spec.equality.forEach((field, i) => {
    const value = values[i] as string | readonly string[];
    query =
      typeof value === 'string'
        ? query.where(field, '==', value)
        : query.where(field, 'in', [...value]);
  });
  const { field, direction } = spec.orderBy;
  if (page.from !== undefined) {
    query = query.where(field, '>=', page.from);
  }
  if (page.to !== undefined) {
    query = query.where(field, '<=', page.to);
  }
  // The index's implicit last field is the document id in the last field's direction.
  query = query
    .orderBy(field, direction)
    .orderBy(FieldPath.documentId(), direction);
  if (page.cursor !== undefined) {
    query = query.startAfter(page.cursor.value, page.cursor.runId);
  }
  return query.limit(page.limit);
}

/** The kinds of run that are not a slot's: listed by query, since no slot computes their ids. */
export const KINDS_OUTSIDE_SLOTS = [
  RunKind.Manual,
  RunKind.Forced,
  RunKind.Rerun,
] as const;
