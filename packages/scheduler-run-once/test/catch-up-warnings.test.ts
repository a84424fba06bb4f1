/**
 * A function instance tells, as it starts, of each job whose `catchUp` cannot run as declared:
 * no run audit, or a closing delay the audit cannot beat (`policy/catch-up-warnings.ts`).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Firestore } from '@google-cloud/firestore';
import { createInstanceHandler } from '../src/function/register.ts';
import {
  defineJob,
  type JobDeclaration,
  validateJobs,
} from '../src/policy/job-declaration.ts';
import { defineAuditJob } from '../src/policy/run-audit.ts';
import { captureLogs, testConfig } from './helpers.ts';

const audit = defineAuditJob({ id: 'run-audit', schedule: '*/5 * * * *' });

/** The WARNING lines an instance serving `declarations` logs as it starts. */
function startWarnings(declarations: JobDeclaration[]) {
  const logs = captureLogs();
  // Never used: an instance connects only when a request comes.
  const firestore = new Firestore({ projectId: 'demo-project' });
  createInstanceHandler({
    config: testConfig(),
    jobs: validateJobs(declarations),
    firestore,
    logger: logs.logger,
  });
  return logs.lines().filter((line) => line.severity === 'WARNING');
}

describe('catch-up that cannot run, told when an instance starts', () => {
  it('warns of a job declaring catchUp when no run audit is declared', () => {
    const warnings = startWarnings([
      defineJob({
        id: 'sync',
        schedule: '* * * * *',
        catchUp: {},
        run: () => {},
      }),
    ]);
    assert.deepEqual(
      warnings.map((w) => [w.message, w.jobName]),
      [['catch-up cannot run', 'sync']],
    );
    assert.match(String(warnings[0]?.problem), /defineAuditJob/);
  });

  it('warns of a job whose slot is reported missed before the audit can find it late', () => {
    // No retries, a 15 s deadline: reported 30 s after its time; late after 120 s + up to 5 min.
    const warnings = startWarnings([
      defineJob({
        id: 'sync',
        schedule: '* * * * *',
        retryCount: 0,
        maxRetryDurationSeconds: 0,
        attemptDeadlineSeconds: 15,
        catchUp: {},
        run: () => {},
      }),
      audit,
    ]);
    assert.deepEqual(
      warnings.map((w) => [w.message, w.jobName]),
      [['catch-up cannot run', 'sync']],
    );
    assert.match(String(warnings[0]?.problem), /reported missed 30 s after/);
  });

  it('says nothing of catchUp with the default retry settings and the audit every 5 minutes', () => {
    const warnings = startWarnings([
      defineJob({
        id: 'sync',
        schedule: '* * * * *',
        catchUp: {},
        run: () => {},
      }),
      defineJob({ id: 'plain', schedule: '* * * * *', run: () => {} }),
      audit,
    ]);
    assert.deepEqual(warnings, []);
  });
});
