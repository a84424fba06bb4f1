/**
 * The check `deploy.sh` runs through `node ops/jobs.ts --deploy`: the packages a jobs module loads
 * that `package.json` lists only in devDependencies (`src/ops/dependencies.ts`), read statically.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import {
  devOnlyImports,
  packageOf,
  valueImports,
} from '../../src/ops/dependencies.ts';

const scratch = mkdtempSync(path.join(tmpdir(), 'dependencies-test-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

describe('valueImports', () => {
  it('reads what Node loads, and skips what type stripping erases', () => {
    const source = [
      "import { a } from 'pkg-a';",
      "import type { B } from 'pkg-b';",
      'import {',
      '  c,',
      '  type D,',
      "} from '@scope/pkg-c/sub';",
      "export * from './local.ts';",
      "export type { E } from 'pkg-e';",
      "import 'side-effect';",
      "const lazy = await import('pkg-lazy');",
      " * import { inComment } from 'pkg-comment';",
    ].join('\n');

    assert.deepEqual(valueImports(source), [
      'pkg-a',
      '@scope/pkg-c/sub',
      './local.ts',
      'side-effect',
      'pkg-lazy',
    ]);
    assert.deepEqual(['@scope/pkg/sub', 'pkg/sub', 'pkg'].map(packageOf), [
      '@scope/pkg',
      'pkg',
      'pkg',
    ]);
  });
});

describe('devOnlyImports', () => {
  it('finds a devDependency reached through a relative import, once, with the file importing it', () => {
    const dir = path.join(scratch, 'repo');
    mkdirSync(path.join(dir, 'src'), { recursive: true });
    writeFileSync(
      path.join(dir, 'src/jobs.ts'),
      "import { proxy } from './proxy.ts';\nimport pino from 'pino';\nimport fs from 'node:fs';\n",
    );
    writeFileSync(
      path.join(dir, 'src/proxy.ts'),
      "import { Client } from '@google-cloud/workflows';\nimport type { T } from '@google-cloud/run';\nimport { again } from './jobs.ts';\nimport { x } from '@google-cloud/workflows/build';\n",
    );

    const found = devOnlyImports(path.join(dir, 'src/jobs.ts'), dir, {
      dependencies: { pino: '1' },
      devDependencies: {
        '@google-cloud/workflows': '5',
        '@google-cloud/run': '4',
        pino: '1',
      },
    });

    assert.deepEqual(found, [
      { file: 'src/proxy.ts', name: '@google-cloud/workflows' },
    ]);
  });

  it('finds nothing in the starter as shipped', () => {
    const root = path.resolve(import.meta.dirname, '../..');
    const pkg = {
      dependencies: { pino: '1' },
      devDependencies: { '@google-cloud/workflows': '5' },
    };

    assert.deepEqual(
      devOnlyImports(path.join(root, 'src/jobs.ts'), root, pkg),
      [],
    );
  });
});
