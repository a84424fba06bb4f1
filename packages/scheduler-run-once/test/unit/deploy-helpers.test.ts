/**
 * What `deploy.sh` runs with node to read the declarations (`ops/jobs.ts --deploy`), to list the
 * composite indexes (`ops/indexes.ts`) and to write the metrics and dashboard (`ops/alerts.ts`)
 * loads no Firestore client: that client is about 0.4 s of CPU to load, and deploy.sh (and each of
 * its tests) runs these helpers every time. Read
 * from the sources, as Node loads them: value imports only (`import type` is erased).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { valueImports } from '../../src/ops/dependencies.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const FIRESTORE = '@google-cloud/firestore';

/**
 * The chain of files by which `entry` reaches `pkg` through relative value imports, entry first
 * and the importing file last; undefined if it does not.
 */
function chainTo(entry: string, pkg: string): string[] | undefined {
  const via = new Map<string, string | undefined>([[entry, undefined]]);
  const queue = [entry];
  for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
    for (const specifier of valueImports(readFileSync(file, 'utf8'))) {
      if (specifier === pkg || specifier.startsWith(`${pkg}/`)) {
        const chain = [file];
        for (let at = via.get(file); at !== undefined; at = via.get(at)) {
          chain.unshift(at);
        }
        return chain.map((f) => path.relative(ROOT, f));
      }
      const next = path.resolve(path.dirname(file), specifier);
      if (specifier.startsWith('.') && !via.has(next)) {
        via.set(next, file);
        queue.push(next);
      }
    }
  }
  return undefined;
}

describe("deploy.sh's node helpers", () => {
  for (const helper of [
    'src/ops/jobs.ts',
    'src/ops/indexes.ts',
    'src/ops/alerts.ts',
  ]) {
    it(`${helper} loads no Firestore client`, () => {
      const chain = chainTo(path.join(ROOT, helper), FIRESTORE);

      assert.equal(
        chain,
        undefined,
        `${helper} loads ${FIRESTORE} through ${chain?.join(' -> ')}`,
      );
    });
  }

  it('finds the client where a command does load it (the check can fail)', () => {
    const chain = chainTo(path.join(ROOT, 'src/ops/runs.ts'), FIRESTORE);

    assert.equal(chain?.[0], 'src/ops/runs.ts', 'npm run runs reads Firestore');
  });
});
