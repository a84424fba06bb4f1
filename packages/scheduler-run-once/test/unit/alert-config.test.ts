/**
 * The metrics and alert policies `deploy.sh` creates (`src/ops/alert-config.ts`): what each counts, and
 * which jobs get an absence alert. No Firestore, no gcloud.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  alertPolicies,
  logMetric,
  MAX_ABSENCE_SECONDS,
} from '../../src/ops/alert-config.ts';

describe('logMetric', () => {
  it("counts the function's lease-lost warnings, labelled by the short job id", () => {
    const metric = logMetric('reports', 'lease-lost');

    assert.equal(metric.name, 'reports-runs-lease-lost');
    assert.match(
      metric.filter,
      /resource\.labels\.service_name="reports" AND jsonPayload\.leaseLoss:\*/,
    );
    assert.equal(metric.metricDescriptor.labels[0]?.key, 'job');
  });
});

describe('logMetric late', () => {
  it("counts the run audit's late-run warnings the way missed counts missed runs, by job", () => {
    const late = logMetric('reports', 'late');
    const missed = logMetric('reports', 'missed');

    assert.equal(late.name, 'reports-runs-late');
    assert.equal(
      late.filter,
      missed.filter.replace(
        'jsonPayload.message="missed run"',
        'jsonPayload.message="late run"',
      ),
    );
    assert.notEqual(late.filter, missed.filter);
    assert.deepEqual(late.labelExtractors, missed.labelExtractors);
  });
});

describe('alertPolicies', () => {
  it('gives each job an absence alert of N periods, rounded up to whole minutes', () => {
    const plans = alertPolicies(
      'reports',
      [{ id: 'sync', periodSeconds: 90 }],
      ['c'],
      3,
    );

    const absence = plans.at(-1);
    assert.equal(absence?.kind, 'policy');
    assert.match(
      absence?.kind === 'policy' ? absence.displayName : '',
      /no processed run of sync for 300 s/,
    );
  });

  it('skips a job whose window would pass 23.5 hours, saying why', () => {
    const plans = alertPolicies(
      'reports',
      [{ id: 'daily', periodSeconds: 86_400 }],
      ['c'],
    );

    assert.deepEqual(plans.at(-1), {
      kind: 'skipped',
      job: 'daily',
      reason: `2 × its period is 172800 s, past the 23.5 h a metric-absence condition allows`,
    });
    assert.equal(MAX_ABSENCE_SECONDS, 84_600);
  });
});
