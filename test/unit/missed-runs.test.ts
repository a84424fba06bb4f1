/** The pure parts of missed-run detection and the run audit: when a slot is judged, which deliveries check. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { defineJob, validateJobs } from '../../src/policy/job-declaration.ts';
import {
  CHECK_PERIOD_MS,
  checkDocumentId,
  closedAfterMs,
  isDueSlot,
} from '../../src/policy/missed-runs.ts';
import { defineAuditJob, isAuditJob } from '../../src/policy/run-audit.ts';

const [five, daily] = validateJobs([
  defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
  defineJob({ id: 'daily', schedule: '30 2 * * *', timeZone: 'Europe/Berlin', run: () => {} }),
]);

describe('missed-run check timing', () => {
  it('judges a slot one attempt deadline after its retry window: 3750 s with the defaults', () => {
    assert.equal(closedAfterMs(five as never), 3_570_000 + 180_000);
  });

  it('makes only the first slot of each hour due', () => {
    const due = Array.from({ length: 24 }, (_, i) =>
      isDueSlot(five as never, new Date(Date.UTC(2026, 9, 16, 12, 5 * i))),
    );
    assert.deepEqual(
      due.map((d, i) => (d ? i * 5 : -1)).filter((m) => m >= 0),
      [0, 60],
    );
    assert.equal(CHECK_PERIOD_MS, 3_600_000);
  });

  it('makes every slot of a job that runs at most hourly due', () => {
    assert.equal(isDueSlot(daily as never, new Date('2026-10-16T00:30:00Z')), true);
  });

  it('keeps one cursor per job and key scope', () => {
    assert.equal(checkDocumentId('five', []), 'five~check');
    const scoped = checkDocumentId('five', [['env', 'prod']]);
    assert.match(scoped, /^five~check~[0-9a-f]{16}$/);
    assert.notEqual(scoped, checkDocumentId('five', [['env', 'dev']]));
  });
});

describe('run audit declaration', () => {
  it('is a job like any other, recognised after validation', () => {
    const [audit, plain] = validateJobs([
      defineAuditJob({ id: 'run-audit', schedule: '*/30 * * * *' }),
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
    ]);
    assert.equal(audit?.schedule, '*/30 * * * *');
    assert.equal(isAuditJob(audit as never), true);
    assert.equal(isAuditJob(plain as never), false);
  });

  it('refuses to run outside the function', () => {
    const audit = defineAuditJob({ id: 'run-audit', schedule: '*/30 * * * *' });
    assert.throws(() => audit.run({} as never), /only inside the scheduled-job function/);
  });
});
