/**
 * The Cloud Monitoring dashboard `deploy.sh` creates (once, if none has its display name): one chart
 * per log-based metric of `ops/alert-config.ts` that says what became of a job's runs (processed,
 * duplicates absorbed, failed attempts, late and missed side by side, failed after retries,
 * skipped, paused), each a stacked bar per job. Pure: builds the Dashboard JSON that `ops/alerts.ts` writes for
 * `gcloud monitoring dashboards create --config-from-file`.
 *
 * Source: Dashboard (https://cloud.google.com/monitoring/api/ref_v3/rest/v1/projects.dashboards),
 * XyChart and TimeSeriesFilter (the same `metric.type` filters as the alert policies).
 */
import { METRICS, type MetricKind, metricFilter } from './alert-config.ts';

/** The charts, in order: what a person asks first (did it run?) to what explains it. */
export const DASHBOARD_METRICS = [
  'processed',
  'duplicates',
  'failed',
  // Side by side in the grid's third row: late within minutes, missed when the retry window closed.
  'late',
  'missed',
  'failed-after-retries',
  'skipped',
  'paused',
] as const satisfies readonly MetricKind[];

/** The dashboard's display name: how `deploy.sh` finds it on the next run. */
export function dashboardName(functionName: string): string {
  return `${functionName}: runs by job`;
}

/** Each series' legend: Monitoring fills `${metric.labels.job}` itself. */
const LEGEND = ['$', '{metric.labels.job}'].join('');

/** The dashboard's note on when each kind is counted, after what it shows. */
const ABOUT_KINDS =
  'Late slots are logged a grace (2 minutes by default) after they could start, by the run audit; ' +
  'missed and failed-after-retries are reported once their retry window closed; paused slots fall inside `npm run pause`. ' +
  'The slots themselves: `npm run runs -- --since 24h`.';

/** The alignment of every chart, s: an hour per bar, the period of missed-run detection. */
const ALIGNMENT_SECONDS = 3600;

/**
 * The dashboard: a two-column grid with a note, then one stacked-bar chart per metric of
 * {@link DASHBOARD_METRICS}, summed per hour and split by the `job` label.
 *
 * @example writeFileSync('dashboard.json', JSON.stringify(dashboard('scheduler-run-once')));
 */
export function dashboard(functionName: string) {
  return {
    displayName: dashboardName(functionName),
    gridLayout: {
      columns: '2',
      widgets: [
        {
          title: 'About',
          text: {
            format: 'MARKDOWN',
            content: `What became of each job's runs (${functionName}, created by deploy.sh). One bar per hour and job. ${ABOUT_KINDS}`,
          },
        },
        ...DASHBOARD_METRICS.map((kind) => ({
          title: `${kind}: ${METRICS[kind].description}`,
          xyChart: {
            chartOptions: { mode: 'COLOR' },
            dataSets: [
              {
                plotType: 'STACKED_BAR',
                // Monitoring's own placeholder, filled per series: the job label.
                legendTemplate: LEGEND,
                minAlignmentPeriod: `${ALIGNMENT_SECONDS}s`,
                timeSeriesQuery: {
                  timeSeriesFilter: {
                    filter: metricFilter(functionName, kind),
                    aggregation: {
                      alignmentPeriod: `${ALIGNMENT_SECONDS}s`,
                      perSeriesAligner: 'ALIGN_SUM',
                      crossSeriesReducer: 'REDUCE_SUM',
                      groupByFields: ['metric.label.job'],
                    },
                  },
                },
              },
            ],
            yAxis: { label: 'count', scale: 'LINEAR' },
          },
        })),
      ],
    },
  };
}
