/**
 * `npm run demo` as a user runs it (`scripts/with-emulator.ts` starting an emulator of its own, then
 * `src/dev/demo.ts`), with neither `FIRESTORE_EMULATOR_HOST` nor `METADATA_SERVER_DETECTION` set:
 * its stderr has no `MetadataLookupWarning` (issue 43: the warm-up client of with-emulator probed
 * Google's metadata server and printed `… code = 403, ENOTFOUND`).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ROOT, spawnGroup, within } from '../../src/dev/local-processes.ts';

/** An emulator's start, its warm-up and the demo's deliveries, on a loaded machine. */
const DEMO_MS = 110_000;

describe('npm run demo', () => {
  it('prints no MetadataLookupWarning, with an emulator of its own', async () => {
    const env = { ...process.env };
    delete env.FIRESTORE_EMULATOR_HOST;
    delete env.METADATA_SERVER_DETECTION;
    delete env.GOOGLE_CLOUD_PROJECT;
    const demo = spawnGroup(
      process.execPath,
      ['scripts/with-emulator.ts', '--', process.execPath, 'src/dev/demo.ts'],
      { cwd: ROOT, env },
    );
    try {
      await within(demo.exited, DEMO_MS, 'npm run demo to finish');
    } finally {
      demo.signalGroup('SIGKILL');
    }

    const output = demo.output();
    assert.equal(demo.exitCode, 0, output);
    assert.match(output, /Firestore emulator ready/, 'it started its own');
    assert.doesNotMatch(output, /MetadataLookupWarning/);
  });
});
