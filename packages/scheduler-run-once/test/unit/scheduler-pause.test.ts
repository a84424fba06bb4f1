/**
 * `runSchedulerCommand` (`src/ops/scheduler-pause.ts`), the gcloud half of `run-once pause` and
 * `resume`: whether the Cloud Scheduler job changed decides the command's exit status (0, or 4:
 * recorded but not carried out). A fake `gcloud` first on PATH stands for the real one.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import {
  runSchedulerCommand,
  schedulerPauseArgs,
} from '../../src/ops/scheduler-pause.ts';

const bin = mkdtempSync(path.join(tmpdir(), 'fake-gcloud-'));
after(() => rmSync(bin, { recursive: true, force: true }));

/** Runs `runSchedulerCommand` with a gcloud that runs `body`. */
function withGcloud(body: string, verb: 'pause' | 'resume') {
  writeFileSync(path.join(bin, 'gcloud'), `#!/bin/sh\n${body}\n`);
  chmodSync(path.join(bin, 'gcloud'), 0o755);
  const saved = process.env.PATH;
  process.env.PATH = `${bin}${path.delimiter}${saved ?? ''}`;
  try {
    const args = schedulerPauseArgs(verb, {
      jobId: 'nightly',
      location: 'europe-west1',
      project: 'p',
    });
    return runSchedulerCommand(verb, args);
  } finally {
    process.env.PATH = saved;
  }
}

describe('runSchedulerCommand', () => {
  it('reports the Scheduler job changed when gcloud succeeds', () => {
    const result = withGcloud('exit 0', 'pause');

    assert.equal(result.changed, true);
    assert.match(
      result.message,
      /^pause: ran gcloud scheduler jobs pause nightly /,
    );
  });

  it('reports it NOT changed when gcloud fails, with its last error line and the command to run', () => {
    const result = withGcloud(
      'echo "ERROR: (gcloud) PERMISSION_DENIED" >&2; exit 1',
      'resume',
    );

    assert.equal(result.changed, false);
    assert.match(
      result.message,
      /was NOT resumed: gcloud answered: ERROR: \(gcloud\) PERMISSION_DENIED/,
    );
    assert.match(result.message, /\n {2}gcloud scheduler jobs resume nightly /);
  });
});
