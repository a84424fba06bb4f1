/**
 * The bench in smoke mode, end to end: `node bench/run.ts --smoke` against the suite's emulator
 * (inherited FIRESTORE_EMULATOR_HOST) and the built function. Figures are not asserted, only that
 * the bench runs, that the project's ledger ran each storm's job exactly once, and that each
 * cold-start fixture and each kind of compile cache started and answered.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { spawnGroup } from '../../src/dev/local-processes.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The bench's project on the emulator, apart from the one the other test files share. */
const BENCH_PROJECT = 'demo-bench-smoke';

interface StormFigures {
  readonly where: string;
  readonly ledger: string;
  readonly executions: number;
}

interface ColdStartFigures {
  readonly key: string;
  readonly label: string;
  readonly first200: { readonly n: number };
}

async function runBench(
  out: string,
): Promise<{ code: number | null; output: string }> {
  const bench = spawnGroup(
    process.execPath,
    ['bench/run.ts', '--smoke', `--out=${out}`],
    {
      cwd: ROOT,
      // A project of its own on the suite's emulator: the bench leaves thousands of records, and
      // the emulator's every write in a project slows with the documents the project holds.
      env: { ...process.env, GOOGLE_CLOUD_PROJECT: BENCH_PROJECT },
    },
  );
  await bench.exited;
  return { code: bench.exitCode, output: bench.output() };
}

describe('the bench in smoke mode', {
  skip: !existsSync(`${ROOT}dist/index.js`) && 'run `npm run build` first',
}, () => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-smoke-'));
  const out = join(dir, 'results.json');
  // One bench run (about 30 s) serves every test below.
  let bench: { code: number | null; output: string } | undefined;
  before(async () => {
    bench = await runBench(out);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  /** The bench's JSON, once it exited 0. */
  function results<T>(): T {
    assert.equal(bench?.code, 0, bench?.output);
    return JSON.parse(readFileSync(out, 'utf8')) as T;
  }

  it("runs, exits 0, and the project's ledger runs each storm's job exactly once", () => {
    const { storms } = results<{ storms: StormFigures[] }>();

    const projectStorms = storms.filter((s) =>
      s.ledger.startsWith("project's RunLedger"),
    );
    // In process at one instance and spread over 10, and over HTTP.
    assert.equal(projectStorms.length, 3, bench?.output);
    for (const storm of projectStorms) {
      assert.equal(storm.executions, 1, JSON.stringify(storm));
    }
  });

  it('starts each fixture and each kind of compile cache once, each answering its first delivery with 200', () => {
    const { coldStarts } = results<{ coldStarts: ColdStartFigures[] }>();

    // hello world, the floor, the project with its entry's compile cache and with the platform's,
    // and with many jobs as deployed. The floor with the platform's cache and the project without a
    // cache combine these (the project's fixture also serves the storms over HTTP, uncached).
    assert.deepEqual(
      coldStarts.map((start) => start.key),
      [
        'hello',
        'floor',
        'projectCache',
        'projectPlatformCache',
        'projectManyJobs',
      ],
    );
    for (const start of coldStarts) {
      assert.equal(start.first200.n, 1, JSON.stringify(start));
    }
  });
});
