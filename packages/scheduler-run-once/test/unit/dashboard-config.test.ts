/**
 * The dashboard `deploy.sh` creates (`src/ops/dashboard-config.ts`): one chart per kind of run, each
 * counting its log-based metric per job, and a name `deploy.sh` finds it by. No gcloud (the real
 * parser reads the file in test/integration/deploy-gcloud-parser.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { logMetric, METRICS } from '../../src/ops/alert-config.ts';
import {
  DASHBOARD_METRICS,
  dashboard,
  dashboardName,
} from '../../src/ops/dashboard-config.ts';
import { LATE_RUN } from '../../src/policy/late-runs.ts';
import { PAUSED_SLOT } from '../../src/policy/pauses.ts';

describe('dashboard', () => {
  it('charts processed, duplicates, failed, late beside missed, failed after retries, skipped and paused, in that order', () => {
    const board = dashboard('reports');

    const titles = board.gridLayout.widgets.flatMap((w) =>
      'xyChart' in w ? [w.title.split(':')[0]] : [],
    );
    assert.deepEqual(titles, [
      'processed',
      'duplicates',
      'failed',
      'late',
      'missed',
      'failed-after-retries',
      'skipped',
      'paused',
    ]);
  });

  it('puts late and missed in one row of its two columns, late on the left', () => {
    const board = dashboard('reports');

    const titles = board.gridLayout.widgets.map((w) => w.title.split(':')[0]);
    const columns = Number(board.gridLayout.columns);
    const late = titles.indexOf('late');
    const missed = titles.indexOf('missed');
    assert.equal(columns, 2);
    assert.equal(late % columns, 0, titles.join(', '));
    assert.equal(missed, late + 1, titles.join(', '));
  });

  it("reads each chart's metric by its log-based metric's name, summed per hour and split by job", () => {
    const board = dashboard('reports');

    const charts = board.gridLayout.widgets.flatMap((w) =>
      'xyChart' in w ? [w.xyChart] : [],
    );
    for (const [i, kind] of DASHBOARD_METRICS.entries()) {
      const query = charts[i]?.dataSets[0]?.timeSeriesQuery.timeSeriesFilter;
      assert.match(
        query?.filter ?? '',
        new RegExp(
          `metric\\.type="logging\\.googleapis\\.com/user/${logMetric('reports', kind).name}"`,
        ),
      );
      assert.deepEqual(query?.aggregation.groupByFields, ['metric.label.job']);
      assert.equal(query?.aggregation.alignmentPeriod, '3600s');
    }
  });

  it('is found again by its display name', () => {
    assert.equal(dashboard('reports').displayName, dashboardName('reports'));
    assert.equal(dashboardName('reports'), 'reports: runs by job');
  });
});

describe('the metrics behind it', () => {
  it("count the function's duplicate, skipped, paused-slot and late-run lines", () => {
    assert.equal(METRICS.late.match, `jsonPayload.message="${LATE_RUN}"`);
    assert.equal(LATE_RUN, 'late run');
    assert.match(METRICS.duplicates.match, /"scheduled run: duplicate"/);
    assert.match(METRICS.skipped.match, /"scheduled run: skipped"/);
    assert.equal(METRICS.paused.match, `jsonPayload.message="${PAUSED_SLOT}"`);
  });
});
