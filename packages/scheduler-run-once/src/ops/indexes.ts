/**
 * The queries the code makes of the runs collection, declared once, and the composite indexes they
 * need. Every query is built from a {@link QuerySpec} here (by `buildQuery`, `build-query.ts`), so
 * the index list cannot drift from the queries: `deploy.sh` creates each index of {@link INDEXES}
 * (it reads them with `node ops/indexes.ts`), and `test/unit/indexes.test.ts` checks that nothing
 * else queries. This module loads no Firestore client, so the node `deploy.sh` starts here is quick.
 *
 * Why it matters: the emulator serves any query without an index, so tests pass; production
 * Firestore answers `FAILED_PRECONDITION` ("The query requires an index") for a query that filters
 * on one field and orders by another until its composite index exists ("Index types in Cloud
 * Firestore": "If you attempt a compound query with a range clause that doesn't map to an existing
 * index, you receive an error"). Slot reads go by document id and need none.
 *
 *   node ops/indexes.ts [--collection NAME] [--missing]
 *
 * prints one line per index of the runs collection NAME: `--field-config=…<TAB>--field-config=…`;
 * with `--missing`, only those absent from the JSON of `gcloud firestore indexes composite list
 * --format=json` read on stdin; `--as-listed` prints that JSON as if every index existed (for
 * `deploy.sh --dry-run --assume-existing`).
 */

import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Field } from '../core/run-fields.ts';
import { isEntryPoint, runCommand } from './command.ts';

/** A field's order in an index and in the query's `orderBy`. */
export type Direction = 'asc' | 'desc';

/**
 * One query of the runs collection: equality filters (`==`, or `in` for a list), then one field
 * ordered (with a range on it), paged by document id. Its composite index is the equality fields
 * ascending, then the ordered field in its direction.
 */
export interface QuerySpec {
  /** What the query answers, for people. */
  readonly purpose: string;
  /** Fields filtered by equality (`==` for a value, `in` for a list), in index order. */
  readonly equality: readonly string[];
  /** The field ordered by, and filtered by range. */
  readonly orderBy: { readonly field: string; readonly direction: Direction };
}

/** Every query the code makes of the runs collection. */
export const QUERIES = {
  /** Manual, forced and re-run records of one job, newest first, in a window of schedule times. */
  runsOutsideSlots: {
    purpose: "a job's manual and forced runs, newest first (npm run runs)",
    equality: [Field.jobName, Field.kind],
    orderBy: { field: Field.scheduleTime, direction: 'desc' },
  },
  /** Every record of one job id, newest first: the history of an id no longer declared. */
  recordsOfJob: {
    purpose:
      'every record of a job id, newest first (npm run runs -- --job ID of a renamed job)',
    equality: [Field.jobName],
    orderBy: { field: Field.scheduleTime, direction: 'desc' },
  },
} as const satisfies Record<string, QuerySpec>;

/** A composite index: its fields in order, on the runs collection. */
export interface IndexSpec {
  readonly fields: readonly {
    readonly field: string;
    readonly order: 'ascending' | 'descending';
  }[];
}

/** The composite index a query needs. */
export function indexOf(spec: QuerySpec): IndexSpec {
  return {
    fields: [
      ...spec.equality.map((field) => ({ field, order: 'ascending' as const })),
      {
        field: spec.orderBy.field,
        order:
          spec.orderBy.direction === 'asc'
            ? ('ascending' as const)
            : ('descending' as const),
      },
    ],
  };
}

/** The composite indexes of the runs collection: one per query of {@link QUERIES}. */
export const INDEXES: readonly IndexSpec[] =
  Object.values(QUERIES).map(indexOf);

/**
 * The `gcloud firestore indexes composite create` flags of an index, one `--field-config` per
 * field ("gcloud firestore indexes composite create": `--field-config=field-path=…,order=…`,
 * repeated in the index's field order).
 *
 * @example fieldConfigs(INDEXES[0]) // ['--field-config=field-path=job_name,order=ascending', …]
 */
export function fieldConfigs(index: IndexSpec): string[] {
  return index.fields.map(
    ({ field, order }) => `--field-config=field-path=${field},order=${order}`,
  );
}

/** An index as `gcloud firestore indexes composite list --format=json` lists it (the fields used). */
export interface ListedIndex {
  readonly name?: string;
  readonly queryScope?: string;
  readonly fields?: readonly {
    readonly fieldPath?: string;
    readonly order?: string;
  }[];
}

/** The collection group of a listed index, from its name `…/collectionGroups/GROUP/indexes/ID`. */
function groupOf(listed: ListedIndex): string | undefined {
  return /\/collectionGroups\/([^/]+)\/indexes\//.exec(listed.name ?? '')?.[1];
}

/** Whether `listed` is `index` on `collection`: same fields and orders, `__name__` aside. */
export function sameIndex(
  listed: ListedIndex,
  index: IndexSpec,
  collection: string,
): boolean {
  if (
    groupOf(listed) !== collection ||
    (listed.queryScope ?? 'COLLECTION') !== 'COLLECTION'
  ) {
    return false;
  }
  const fields = (listed.fields ?? []).filter(
    (f) => f.fieldPath !== '__name__',
  );
  return (
    fields.length === index.fields.length &&
    index.fields.every(
      ({ field, order }, i) =>
        fields[i]?.fieldPath === field &&
        fields[i]?.order?.toLowerCase() === order,
    )
  );
}

/**
 * The indexes of {@link INDEXES} on `collection` that `listed` does not hold.
 *
 * @example missingIndexes(JSON.parse(gcloudListJson), 'scheduler_runs')
 */
export function missingIndexes(
  listed: readonly ListedIndex[],
  collection: string,
): IndexSpec[] {
  return INDEXES.filter(
    (index) => !listed.some((l) => sameIndex(l, index, collection)),
  );
}

/** {@link INDEXES} on `collection` as gcloud would list them once created. */
export function asListed(collection: string): ListedIndex[] {
  return INDEXES.map((index, i) => ({
    name: `projects/PROJECT/databases/DATABASE/collectionGroups/${collection}/indexes/INDEX${i}`,
    queryScope: 'COLLECTION',
    fields: index.fields.map(({ field, order }) => ({
      fieldPath: field,
      order: order.toUpperCase(),
    })),
  }));
}

/** What the command prints for `--help` and with a bad argument (exit 2). */
export const USAGE =
  'usage: node src/ops/indexes.ts [--collection NAME] [--missing | --as-listed]\n' +
  '  (no flag)     the composite indexes the queries need, one per line, as gcloud takes them\n' +
  '  --missing     only those missing from the JSON list of `gcloud firestore indexes composite list` on stdin\n' +
  "  --as-listed   the indexes as that list shows them once created (deploy.sh's dry run)";

/**
 * `node src/ops/indexes.ts` (deploy.sh's index step), for {@link runCommand}: `argv` after the
 * script; resolves to the exit status.
 */
export async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      collection: { type: 'string', default: 'scheduler_runs' },
      missing: { type: 'boolean' },
      'as-listed': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const collection = values.collection;
  if (values['as-listed']) {
    console.log(JSON.stringify(asListed(collection)));
    return 0;
  }
  const indexes = values.missing
    ? missingIndexes(
        JSON.parse(readFileSync(0, 'utf8') || '[]') as ListedIndex[],
        collection,
      )
    : INDEXES;
  for (const index of indexes) {
    console.log(fieldConfigs(index).join('\t'));
  }
  return 0;
}

if (isEntryPoint(import.meta.url)) {
  await runCommand('indexes', USAGE, main);
}
