/**
 * A wall clock that steps back 5 minutes on a warm instance, as NTP or an operator can step it,
 * leaves Scheduler's on-time delivery its slot's run. The instance of
 * `test/fixtures/fault-function.ts` runs under libfaketime reading its offset from a file (re-read
 * every second), so the test steps the clock of the running process; its monotonic clock
 * (`performance.now()`) is left alone, as a stepped machine's is.
 *
 * Against the code that estimated Firestore's time as `Date.now()` plus a skew learnt at the last
 * answer, the stepped instance took the delivery for one 5 minutes early: a forced run, or (for a
 * per-minute job, whose next slot it then was not) a 400 "after the job's next slot".
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { computeRunId } from '../../src/core/run-key.ts';
import {
  deliver,
  removeScratch,
  scheduled,
  scratch,
  startFunction,
  waitFor,
  warmUp,
} from '../fixtures/harness.ts';
import { LIBFAKETIME, outerClockOffsetS } from '../fixtures/times.ts';

after(removeScratch);

const STEP_S = -300;
const JOB = 'clockstep';
describe('a wall clock stepped on a warm instance', () => {
  it('leaves Scheduler’s on-time delivery its slot’s run after the clock stepped back 5 minutes', async (t) => {
    if (LIBFAKETIME === undefined) {
      throw new Error(
        "libfaketime.so.1 not found: this suite needs Debian's faketime to step an instance's clock; install it with `apt-get install faketime` (.ci/run does)",
      );
    }
    const offsetFile = join(scratch, `${randomUUID()}.faketime`);
    // Offsets from the machine's clock: the suite's own under an outer `faketime` (0 without), then
    // the step on top. `env -u FAKETIME`: an outer faketime's variable would win over the file.
    const outerS = outerClockOffsetS();
    writeFileSync(offsetFile, `${outerS >= 0 ? '+' : ''}${outerS}\n`);
    const fn = await startFunction({
      env: { FAULT_JOB_IDS: JOB, FAKETIME_DONT_FAKE_MONOTONIC: '1' },
      wrapper: [
        'env',
        '-u',
        'FAKETIME',
        `LD_PRELOAD=${LIBFAKETIME}`,
        `FAKETIME_TIMESTAMP_FILE=${offsetFile}`,
        'FAKETIME_CACHE_DURATION=1',
      ],
    });
    t.after(() => fn.kill());
    await warmUp(fn);

    writeFileSync(
      offsetFile,
      `${outerS + STEP_S >= 0 ? '+' : ''}${outerS + STEP_S}\n`,
    );
    await waitFor(
      'the instance’s wall clock to step back',
      async () => {
        const res = await fetch(fn.url, {
          signal: AbortSignal.timeout(10_000),
        });
        await res.text();
        const offset = Date.parse(res.headers.get('date') ?? '') - Date.now();
        return Math.abs(offset - STEP_S * 1000) < 3_000 ? true : undefined;
      },
      15_000,
    );
    const slot = new Date(Math.floor(Date.now() / 60_000) * 60_000)
      .toISOString()
      .replace('.000Z', 'Z');
    const answer = await deliver(fn.url, scheduled(JOB, slot));

    assert.deepEqual(
      [answer.status, answer.body.outcome],
      [200, 'processed'],
      answer.body.message,
    );
    assert.equal(
      answer.body.runId,
      computeRunId({ jobName: JOB, scheduleTime: slot, scope: [] }),
      'the slot’s own run id, not a forced run’s',
    );
  });
});
