/**
 * The bench in smoke mode, end to end: `node bench/run.ts --smoke` against the suite's emulator
 * (inherited FIRESTORE_EMULATOR_HOST) and the built function. Figures are not asserted, only that
 * the bench runs and that the project's ledger ran each storm's job exactly once.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { spawnGroup } from '../../scripts/local-processes.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

interface StormFigures {
  readonly where: string;
  readonly ledger: string;
  readonly executions: number;
}

async function runBench(out: string): Promise<{ code: number | null; output: string }> {
  const bench = spawnGroup(process.execPath, ['bench/run.ts', '--smoke', `--out=${out}`], {
    cwd: ROOT,
  });
  await bench.exited;
  return { code: bench.exitCode, output: bench.output() };
}

describe('the bench in smoke mode', {
  skip: !existsSync(`${ROOT}build/index.js`) && 'run `npm run build` first',
}, () => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-smoke-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("runs, exits 0, and the project's ledger runs each storm's job exactly once", async () => {
    const out = join(dir, 'results.json');

    const { code, output } = await runBench(out);

    assert.equal(code, 0, output);
    const { storms } = JSON.parse(readFileSync(out, 'utf8')) as { storms: StormFigures[] };
    const projectStorms = storms.filter((s) => s.ledger.startsWith("project's RunLedger"));
    // In process at one instance and spread over 10, and over HTTP.
    assert.equal(projectStorms.length, 3, output);
    for (const storm of projectStorms) assert.equal(storm.executions, 1, JSON.stringify(storm));
  });
});
