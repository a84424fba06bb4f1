/**
 * What `deploy.sh` creates in Cloud Logging and Cloud Monitoring so that a run that did not happen
 * exactly once reaches a person: log-based metrics that count the function's own log lines, labelled
 * by job, and (opt-in) alert policies on them. Pure: builds the resources' JSON; `ops/alerts.ts`
 * writes it for `gcloud logging metrics create --config-from-file` and
 * `gcloud alpha monitoring policies create --policy-from-file`.
 *
 * Sources: LogMetric (https://cloud.google.com/logging/docs/reference/v2/rest/v2/projects.metrics),
 * AlertPolicy (https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.alertPolicies);
 * a metric-absence condition's duration is at most 23.5 hours
 * (https://cloud.google.com/monitoring/alerts/metric-absence).
 */
import {
  FAILED_AFTER_RETRIES,
  LATE_RUN,
  MISSED_RUN,
  PAUSED_SLOT,
} from '../policy/log-messages.ts';

/** The longest metric-absence duration Cloud Monitoring accepts, s (23.5 h). */
export const MAX_ABSENCE_SECONDS = 84_600;

/** Each metric: its name suffix, what it counts, and the log lines it matches. */
export const METRICS = {
  processed: {
    description: 'runs processed (the job ran and completed)',
    match: 'jsonPayload.message="scheduled run: processed"',
  },
  duplicates: {
    description:
      'duplicate deliveries absorbed (the run had completed: the job was not run again)',
    match: 'jsonPayload.message="scheduled run: duplicate"',
  },
  failed: {
    description: 'failed attempts (the job threw; Scheduler retries)',
    match: 'jsonPayload.message="scheduled run: failed"',
  },
  'failed-after-retries': {
    description: 'runs whose last attempt failed past the retry window',
    match: `jsonPayload.message="${FAILED_AFTER_RETRIES}"`,
  },
  missed: {
    description: 'runs no attempt came for within the retry window',
    match: `jsonPayload.message="${MISSED_RUN}"`,
  },
  late: {
    description:
      'slots with no attempt a grace after they could start (caught up, or reported missed later)',
    match: `jsonPayload.message="${LATE_RUN}"`,
  },
  skipped: {
    description:
      'slots not run because an earlier run of the job still ran (overlap policy skip)',
    match: 'jsonPayload.message="scheduled run: skipped"',
  },
  paused: {
    description:
      'slots inside a pause (npm run pause), judged by missed-run detection',
    match: `jsonPayload.message="${PAUSED_SLOT}"`,
  },
  'lease-lost': {
    description:
      'attempts whose lease another attempt took over (the job may have run twice)',
    match: 'jsonPayload.leaseLoss:*',
  },
} as const;
export type MetricKind = keyof typeof METRICS;

/** The log-based metric's name for `kind` of function `functionName`. */
export function metricName(functionName: string, kind: MetricKind): string {
  return `${functionName}-runs-${kind}`;
}

/**
 * A LogMetric counting `kind` lines of the function's Cloud Run service, with a `job` label (the
 * short job id, whatever form of it the delivery carried).
 */
export function logMetric(functionName: string, kind: MetricKind) {
  return {
    name: metricName(functionName, kind),
    description: `${functionName}: ${METRICS[kind].description} (deploy.sh)`,
    filter: [
      'resource.type="cloud_run_revision"',
      `resource.labels.service_name="${functionName}"`,
      METRICS[kind].match,
    ].join(' AND '),
    labelExtractors: { job: 'REGEXP_EXTRACT(jsonPayload.jobName, "([^/]+)$")' },
    metricDescriptor: {
      metricKind: 'DELTA',
      valueType: 'INT64',
      unit: '1',
      labels: [
        {
          key: 'job',
          valueType: 'STRING',
          description: 'the Scheduler job id',
        },
      ],
    },
  };
}

export function metricFilter(
  functionName: string,
  kind: MetricKind,
  job?: string,
): string {
  return [
    `metric.type="logging.googleapis.com/user/${metricName(functionName, kind)}"`,
    'resource.type="cloud_run_revision"',
    ...(job === undefined ? [] : [`metric.label.job="${job}"`]),
  ].join(' AND ');
}

function anyCount(functionName: string, kind: MetricKind, name: string) {
  return {
    displayName: name,
    conditionThreshold: {
      filter: metricFilter(functionName, kind),
      comparison: 'COMPARISON_GT',
      thresholdValue: 0,
      duration: '0s',
      aggregations: [
        { alignmentPeriod: '300s', perSeriesAligner: 'ALIGN_SUM' },
      ],
    },
  };
}

/** A job as the alerts need it: its id and its period (the longest gap between its slots), s. */
export interface AlertedJob {
  readonly id: string;
  readonly periodSeconds: number;
}

/** One alert policy, or why a job has none. */
export type PolicyPlan =
  | {
      readonly kind: 'policy';
      readonly displayName: string;
      readonly policy: object;
    }
  | { readonly kind: 'skipped'; readonly job: string; readonly reason: string };

/**
 * The alert policies: missed or finally failed runs, lost leases, and per job "no processed run for
 * `absencePeriods` × its period" (the case where nothing is delivered at all, which in-function
 * detection cannot see). A job whose window would pass 23.5 hours gets no absence policy: rely on
 * missed-run detection and `npm run runs -- --check`.
 *
 * @param channels - notification channel names, `projects/P/notificationChannels/ID`.
 */
export function alertPolicies(
  functionName: string,
  jobs: readonly AlertedJob[],
  channels: readonly string[],
  absencePeriods = 2,
): PolicyPlan[] {
  const common: PolicyCommon = {
    combiner: 'OR',
    notificationChannels: [...channels],
    enabled: true,
  };
  return [
    ...runPolicies(functionName, common),
    ...jobs.map((job) =>
      absencePolicy(functionName, job, common, absencePeriods),
    ),
  ];
}

/** What every alert policy shares: its combiner, its notification channels, enabled. */
interface PolicyCommon {
  readonly combiner: string;
  readonly notificationChannels: string[];
  readonly enabled: boolean;
}

/** The policies on runs: missed or finally failed, and lost leases. */
function runPolicies(functionName: string, common: PolicyCommon): PolicyPlan[] {
  return [
    {
      kind: 'policy',
      displayName: `${functionName}: a run was missed or failed after every retry`,
      policy: {
        ...common,
        displayName: `${functionName}: a run was missed or failed after every retry`,
        conditions: [
          anyCount(functionName, 'missed', 'missed run'),
          anyCount(
            functionName,
            'failed-after-retries',
            'run failed after retries',
          ),
        ],
        documentation: {
          mimeType: 'text/markdown',
          content:
            'A scheduled run did not happen: no attempt came within its retry window (missed), or every attempt failed. ' +
            'See which: `npm run runs -- --since 24h`. Fix the cause (the last error is in the history), then deliver the slot again: `npm run trigger -- JOB --slot T`.',
        },
      },
    },
    {
      kind: 'policy',
      displayName: `${functionName}: a lease was lost (a job may have run twice)`,
      policy: {
        ...common,
        displayName: `${functionName}: a lease was lost (a job may have run twice)`,
        conditions: [anyCount(functionName, 'lease-lost', 'lease lost')],
        documentation: {
          mimeType: 'text/markdown',
          content:
            'Another attempt took a run over while the first still ran: the job may have run twice. The `lease lost` log line says why ' +
            '(job timeout ignored, Firestore unreachable, instance paused). Check the downstream for a duplicate effect (it got the same run id).',
        },
      },
    },
  ];
}

/**
 * A job's "no processed run for `absencePeriods` × its period" policy, or why it has none (a
 * window past what a metric-absence condition allows).
 */
function absencePolicy(
  functionName: string,
  job: AlertedJob,
  common: PolicyCommon,
  absencePeriods: number,
): PolicyPlan {
  const seconds = Math.ceil((job.periodSeconds * absencePeriods) / 60) * 60;
  if (seconds > MAX_ABSENCE_SECONDS) {
    return {
      kind: 'skipped',
      job: job.id,
      reason: `${absencePeriods} × its period is ${seconds} s, past the 23.5 h a metric-absence condition allows`,
    };
  }
  const displayName = `${functionName}: no processed run of ${job.id} for ${seconds} s`;
  return {
    kind: 'policy',
    displayName,
    policy: {
      ...common,
      displayName,
      conditions: [
        {
          displayName: `no processed run of ${job.id}`,
          conditionAbsent: {
            filter: metricFilter(functionName, 'processed', job.id),
            duration: `${Math.max(120, seconds)}s`,
            aggregations: [
              { alignmentPeriod: '300s', perSeriesAligner: 'ALIGN_SUM' },
            ],
          },
        },
      ],
      documentation: {
        mimeType: 'text/markdown',
        content:
          `Nothing processed a run of ${job.id} for ${absencePeriods} of its periods: the Scheduler job may be paused or deleted, or every delivery fails before the function runs. ` +
          `Check \`gcloud scheduler jobs describe ${job.id}\` and the function's logs, then backfill: \`npm run runs -- --job ${job.id} --backfill\`.`,
      },
    },
  };
}
