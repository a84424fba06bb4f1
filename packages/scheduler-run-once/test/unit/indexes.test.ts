/**
 * The composite indexes `deploy.sh` creates cover every query the code makes (`src/ops/indexes.ts`):
 * production Firestore refuses a query without its index, which the emulator never shows.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import type { Query } from '@google-cloud/firestore';
import { buildQuery } from '../../src/ops/build-query.ts';
import {
  INDEXES,
  indexOf,
  missingIndexes,
  QUERIES,
  type QuerySpec,
} from '../../src/ops/indexes.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

function sources(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), {
    recursive: true,
    encoding: 'utf8',
  })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => path.join(dir, file));
}

/** A stand-in query that records the clauses built on it. */
function recordingQuery() {
  const clauses: string[][] = [];
  const query: Record<string, unknown> = {};
  for (const method of ['where', 'orderBy', 'startAfter', 'limit']) {
    query[method] = (...args: unknown[]) => {
      clauses.push([
        method,
        ...args.map((a) => (typeof a === 'string' ? a : String(a))),
      ]);
      return query;
    };
  }
  return { query: query as unknown as Query<unknown>, clauses };
}

describe('composite indexes', () => {
  it('no module queries Firestore except through a declared query spec', () => {
    const offenders = [...sources('src'), ...sources('scripts')]
      .filter((file) => file !== path.join('src', 'ops', 'build-query.ts'))
      .filter((file) =>
        /\.(where|orderBy)\(/.test(readFileSync(path.join(ROOT, file), 'utf8')),
      );

    assert.deepEqual(offenders, []);
  });

  for (const [name, spec] of Object.entries(QUERIES) as [string, QuerySpec][]) {
    it(`${name}: the query filters and orders exactly as its index, which deploy.sh creates`, () => {
      const { query, clauses } = recordingQuery();
      const values = spec.equality.map((_, i) =>
        i === 0 ? 'job' : ['a', 'b'],
      );

      buildQuery(query, spec, values, { limit: 10 });

      const filtered = clauses
        .filter(([m]) => m === 'where')
        .map(([, field]) => field);
      const ordered = clauses
        .filter(([m]) => m === 'orderBy')
        .map(([, field, dir]) => [field, dir]);
      const index = indexOf(spec);
      assert.deepEqual(
        filtered,
        index.fields.slice(0, -1).map((f) => f.field),
      );
      assert.deepEqual(ordered[0], [
        index.fields.at(-1)?.field,
        spec.orderBy.direction,
      ]);
      assert.ok(
        INDEXES.some((i) => JSON.stringify(i) === JSON.stringify(index)),
      );
    });
  }

  it('finds an index missing from a listing, __name__ and other collections aside', () => {
    const [first, second] = INDEXES;
    const listed = [
      {
        name: 'projects/p/databases/(default)/collectionGroups/runs/indexes/A',
        queryScope: 'COLLECTION',
        fields: [
          ...(first?.fields ?? []).map((f) => ({
            fieldPath: f.field,
            order: f.order.toUpperCase(),
          })),
          { fieldPath: '__name__', order: 'DESCENDING' },
        ],
      },
      {
        name: 'projects/p/databases/(default)/collectionGroups/other/indexes/B',
        fields: (second?.fields ?? []).map((f) => ({
          fieldPath: f.field,
          order: f.order.toUpperCase(),
        })),
      },
    ];

    assert.deepEqual(missingIndexes(listed, 'runs'), [second]);
  });
});

describe('node ops/indexes.ts, as deploy.sh runs it', () => {
  it('prints every index from a checkout reached through a symbolic link', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'indexes-link-'));
    try {
      const link = path.join(dir, 'checkout');
      symlinkSync(ROOT, link);

      const run = spawnSync(
        process.execPath,
        [path.join(link, 'src/ops/indexes.ts')],
        {
          encoding: 'utf8',
        },
      );

      assert.equal(run.status, 0, run.stderr);
      assert.equal(
        run.stdout.trim().split('\n').length,
        INDEXES.length,
        run.stdout,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
