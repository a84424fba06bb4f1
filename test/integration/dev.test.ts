/**
 * `npm run dev` (`scripts/dev.ts`) as a process: it serves a function on the emulator the tests
 * share, its local Scheduler fires a declared job at once (`--fire`), the delivery shows as one
 * `scheduler …` line and the function's log lines show readable, and Ctrl-C (SIGINT) stops it all
 * with status 0; its history page serves the `runs --html` page of that emulator. The jobs are a
 * test's (`JOBS_MODULE=test/fixtures/jobs-one.ts`, served by `test/fixtures/dev-function.ts`
 * through `--source`/`--target`), never the user's: replacing `src/job.ts` changes nothing here.
 * `--no-watch` leaves src/ alone.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { freePort, ROOT, spawnGroup, waitFor } from '../../scripts/local-processes.ts';
import { jobs } from '../fixtures/jobs-one.ts';

const START_MS = 60_000;

describe('npm run dev', () => {
  it('fires a declared job through its local Scheduler, shows readable logs and a history page, and stops on Ctrl-C', async () => {
    assert.ok(existsSync(path.join(ROOT, 'build/main.cjs')), 'run `npm run build` first');
    const port = await freePort();
    const id = jobs[0]?.id ?? 'scheduled-job';
    const dev = spawnGroup(
      process.execPath,
      [
        'scripts/dev.ts',
        '--fire',
        id,
        '--no-watch',
        '--no-build',
        '--source',
        'test/fixtures/dev-function.ts',
        '--target',
        'devFunction',
      ],
      {
        cwd: ROOT,
        env: { ...process.env, PORT: String(port), JOBS_MODULE: 'test/fixtures/jobs-one.ts' },
      },
    );

    try {
      await waitFor(
        'a scheduler line for the forced run',
        () => {
          if (!dev.running()) throw new Error(`dev exited:\n${dev.output()}`);
          return /^scheduler {2}.* attempt 1 \(forced run\) /m.test(dev.output()) || undefined;
        },
        START_MS,
      );
      const pageUrl = /^dev: run history page: (http:\S+)/m.exec(dev.output())?.[1];
      assert.ok(pageUrl, dev.output());
      const page = await fetch(pageUrl, { signal: AbortSignal.timeout(30_000) });
      const html = await page.text();
      assert.equal(page.status, 200, html);
      assert.match(html, new RegExp(`<h2>${id}</h2>`));
      assert.match(html, /data-state="/);
      const refused = await fetch(`${pageUrl}?since=yesterday`);
      assert.equal(refused.status, 400);
      await refused.text();
      dev.signalGroup('SIGINT');
      await dev.exited;
    } finally {
      dev.signalGroup('SIGKILL');
    }

    const output = dev.output();
    assert.match(
      output,
      new RegExp(
        `^scheduler {2}\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z {2}${id} +slot \\S+Z {2}attempt 1 `,
        'm',
      ),
    );
    assert.match(output, /^\d\d:\d\d:\d\d\.\d{3}Z INFO: scheduled run: processed \{/m);
    assert.doesNotMatch(output, /^\{"severity"/m, 'no raw JSON log lines on the terminal');
    assert.match(output, /^dev: stopping$/m);
    assert.equal(dev.exitCode, 0, output);
  });
});
