/**
 * An old Node fails fast, in one line: `bin/check-node.cjs` (the first thing `run-once` does; every
 * npm script of the starter the README names runs `run-once COMMAND` or `run-once check-node && …`
 * first) under the machine's own older Node, `npm run dev` and `npm test` with that Node's
 * npm, and `npm install` (refused by `engine-strict` in `.npmrc`). The old Node is looked up on
 * PATH and in the usual places; without one the cases that need it are skipped, loudly.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import {
  STARTER_CHECKS_SKIP,
  STARTER_ROOT,
} from '../fixtures/starter-checkout.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
/** The starter's scripts run the library's check first. */
/** A starter script checks Node first when it is a `run-once` command (each checks first). */
const CHECKS_FIRST = /^run-once [a-z-]+/;

interface PackageJson {
  engines: { node: string };
  scripts: Record<string, string>;
}

/** The `package.json` in `dir`. */
function packageJsonIn(dir: string): PackageJson {
  return JSON.parse(
    readFileSync(path.join(dir, 'package.json'), 'utf8'),
  ) as PackageJson;
}

const MINIMUM = packageJsonIn(ROOT).engines.node.replace(/^>=/, '');

function versionOf(node: string): string | undefined {
  const result = spawnSync(node, ['--version'], { encoding: 'utf8' });
  return result.status === 0 ? result.stdout.trim() : undefined;
}

function older(version: string, minimum: string): boolean {
  const [a = 0, b = 0] = version.replace(/^v/, '').split('.').map(Number);
  const [c = 0, d = 0] = minimum.split('.').map(Number);
  return a < c || (a === c && b < d);
}

/** A Node older than the project's minimum on this machine, and the directory it is in. */
function findOldNode():
  | { node: string; version: string; dir: string }
  | undefined {
  const candidates = [
    ...(process.env.PATH ?? '')
      .split(path.delimiter)
      .map((dir) => path.join(dir, 'node')),
    '/usr/bin/node',
    '/usr/local/bin/node',
  ];
  for (const node of candidates) {
    if (!existsSync(node)) {
      continue;
    }
    const version = versionOf(node);
    if (version !== undefined && older(version, MINIMUM)) {
      return { node, version, dir: path.dirname(node) };
    }
  }
  return undefined;
}

const old = findOldNode();
const noOldNode =
  old === undefined &&
  `no Node older than ${MINIMUM} on this machine to test with`;
if (noOldNode) {
  console.warn(`SKIPPED check-node cases: ${noOldNode}`);
}

/** PATH with the old Node's directory first and no directory holding a newer `node`. */
function oldPath(dir: string): string {
  const rest = (process.env.PATH ?? '').split(path.delimiter).filter((d) => {
    const node = path.join(d, 'node');
    const version = existsSync(node) ? versionOf(node) : undefined;
    return version === undefined || older(version, MINIMUM);
  });
  return [dir, ...rest].join(path.delimiter);
}

/** The one line the check prints for the old Node. */
function expectedLine(version: string): RegExp {
  return new RegExp(
    `^scheduler-run-once needs Node\\.js >= ${MINIMUM.replace('.', '\\.')}; found Node\\.js ${version.replace(/\./g, '\\.')} \\(`,
  );
}

describe('bin/check-node.cjs', () => {
  it('says in one line which Node it needs and which it found, and exits 1', {
    skip: noOldNode,
  }, () => {
    const { node, version } = old as NonNullable<typeof old>;

    const result = spawnSync(node, ['bin/check-node.cjs'], {
      cwd: ROOT,
      encoding: 'utf8',
    });

    assert.equal(result.status, 1);
    assert.equal(result.stdout, '');
    const lines = result.stderr.trimEnd().split('\n');
    assert.equal(lines.length, 1, result.stderr);
    assert.match(lines[0] as string, expectedLine(version));
  });

  it('says nothing and exits 0 on this Node', () => {
    const result = spawnSync(process.execPath, ['bin/check-node.cjs'], {
      cwd: ROOT,
      encoding: 'utf8',
    });

    assert.equal(result.status, 0);
    assert.equal(result.stdout + result.stderr, '');
  });

  for (const script of ['dev', 'test']) {
    it(`stops the starter's npm run ${script} under the old Node before it does anything`, {
      skip: STARTER_CHECKS_SKIP || noOldNode,
    }, () => {
      const { dir, version } = old as NonNullable<typeof old>;
      const npm = path.join(dir, 'npm');
      if (!existsSync(npm)) {
        return assert.fail(`no npm beside ${dir}/node`);
      }

      const result = spawnSync(npm, ['run', script], {
        cwd: STARTER_ROOT,
        encoding: 'utf8',
        env: {
          ...process.env,
          PATH: oldPath(dir),
          npm_config_update_notifier: 'false',
        },
        timeout: 60_000,
      });

      assert.notEqual(result.status, 0);
      assert.match(
        result.stderr,
        new RegExp(expectedLine(version).source, 'm'),
      );
      // Nothing ran after the check: all that is left, past npm's echo of the script, is its line.
      const output = `${result.stdout}${result.stderr}`
        .split('\n')
        .filter((line) => line.trim() !== '' && !line.startsWith('>'));
      assert.equal(output.length, 1, output.join('\n'));
    });
  }

  it("refuses the starter's npm install under the old Node (engine-strict), naming both versions", {
    skip: STARTER_CHECKS_SKIP || noOldNode,
  }, () => {
    const { dir, version } = old as NonNullable<typeof old>;

    const result = spawnSync(
      path.join(dir, 'npm'),
      ['install', '--dry-run', '--no-audit'],
      {
        cwd: STARTER_ROOT,
        encoding: 'utf8',
        env: {
          ...process.env,
          PATH: oldPath(dir),
          npm_config_update_notifier: 'false',
        },
        timeout: 60_000,
      },
    );

    assert.notEqual(result.status, 0);
    assert.match(result.stderr, /EBADENGINE/);
    assert.match(
      result.stderr,
      new RegExp(`Required: \\{"node":">=${MINIMUM.replace('.', '\\.')}"\\}`),
    );
    assert.match(
      result.stderr,
      new RegExp(`"node":"${version.replace(/\./g, '\\.')}"`),
    );
  });
});

describe("the starter's package.json", { skip: STARTER_CHECKS_SKIP }, () => {
  it('starts every script the README names with the Node check', (t) => {
    const pkg = packageJsonIn(STARTER_ROOT);
    const readme = readFileSync(path.join(STARTER_ROOT, 'README.md'), 'utf8');
    const named = new Set(
      [...readme.matchAll(/npm (?:run ([a-z:0-9-]+)|(test))\b/g)].map(
        (m) => m[1] ?? m[2] ?? '',
      ),
    );
    // `npm run start` appears only to say what Cloud Run does not run; the deployed image has no
    // scripts/ (.gcloudignore), so the production scripts must not need it.
    named.delete('start');

    // A script the README names but package.json lacks fails as `npm run` does ("Missing script"),
    // before any check could run: noted here, not failed, as it is the README's or the script's bug.
    const missing = [...named].filter(
      (name) => pkg.scripts[name] === undefined,
    );
    if (missing.length > 0) {
      t.diagnostic(`README names missing scripts: ${missing.join(', ')}`);
    }
    const unchecked = [...named].filter(
      (name) =>
        pkg.scripts[name] !== undefined &&
        !CHECKS_FIRST.test(pkg.scripts[name]),
    );

    assert.ok(named.has('dev') && named.has('test'), [...named].join(', '));
    assert.deepEqual(unchecked, []);
  });

  it('makes npm install check the engines: engine-strict in .npmrc', () => {
    const npmrc = readFileSync(path.join(STARTER_ROOT, '.npmrc'), 'utf8');

    assert.match(npmrc, /^engine-strict\s*=\s*true$/m);
  });
});
