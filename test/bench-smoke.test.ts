/**
 * The bench in smoke mode, end to end: `node bench/run.ts --smoke` against the suite's emulator
 * (inherited FIRESTORE_EMULATOR_HOST) and the built function. Figures are not asserted, only that
 * the bench runs and that the project's ledger ran each storm's job exactly once.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

interface StormFigures {
  readonly impl: string;
  readonly size: number;
  readonly executions: number;
}

function runBench(out: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bench/run.ts', '--smoke', `--out=${out}`], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => {
      output += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      output += c.toString();
    });
    child.once('exit', (code) => resolve({ code, output }));
  });
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
    const results = JSON.parse(readFileSync(out, 'utf8')) as {
      storms: { inProcess: StormFigures[]; http: StormFigures[] };
    };
    const ledgerStorms = [...results.storms.inProcess, ...results.storms.http].filter(
      (s) => s.impl === 'ledger',
    );
    assert.equal(ledgerStorms.length, 2, output);
    for (const storm of ledgerStorms) assert.equal(storm.executions, 1, JSON.stringify(storm));
  });
});
