/**
 * `node ops/alerts.ts` (run by `deploy.sh`): writes the log-based metrics, the dashboard
 * (`ops/dashboard-config.ts`) and, with channels, the alert policies of `ops/alert-config.ts` into
 * a directory, one JSON file each, and prints one tab-separated line per resource for `deploy.sh`:
 *
 *   metric     NAME          FILE
 *   dashboard  DISPLAY NAME  FILE
 *   policy     DISPLAY NAME  FILE
 *   skipped JOB           REASON
 *
 *   node ops/alerts.ts --function NAME --out DIR [--channels C1,C2] [--absence-periods 2]
 *
 * With `--channels`, reads the declarations like `npm run jobs` (`JOBS_MODULE`) for the policies;
 * without, it never loads them (the metrics and the dashboard are the function's, not a job's:
 * loading a project's jobs loads the library's entry, the Firestore client with it, about half a
 * second of each `deploy.sh` run). Exit 1 on invalid declarations, 2 on bad arguments.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import {
  alertPolicies,
  logMetric,
  METRICS,
  type MetricKind,
} from './alert-config.ts';
import { isEntryPoint, runCommand, UsageError } from './command.ts';
import { dashboard } from './dashboard-config.ts';
import { loadJobs } from './declarations.ts';
import { longestGapMs } from './slots.ts';

/** What the command prints with a bad argument (exit 2) and for `--help`. */
export const USAGE =
  'usage: node src/ops/alerts.ts --function NAME --out DIR [--channels C1,C2] [--absence-periods N]';

/**
 * `node ops/alerts.ts`, for {@link runCommand} and in-process tests: `argv` after the script, the
 * environment `env`; resolves to the exit status.
 */
export async function main(
  argv: string[],
  env: NodeJS.ProcessEnv,
): Promise<number> {
  const args = alertArgs(argv);
  if (args === 'help') {
    console.log(USAGE);
    return 0;
  }
  const jobs = args.channels.length === 0 ? [] : await loadJobs(env);
  mkdirSync(args.out, { recursive: true });
  const write = (file: string, body: object) => {
    const full = path.resolve(args.out, file);
    writeFileSync(full, `${JSON.stringify(body, null, 2)}\n`);
    return full;
  };
  const lines = [
    ...metricAndDashboardLines(args.functionName, write),
    ...policyLines(args, jobs, write),
  ];
  console.log(lines.join('\n'));
  return 0;
}

/** The command's arguments, checked. */
interface AlertArgs {
  readonly functionName: string;
  readonly out: string;
  readonly channels: readonly string[];
  /** Schedule periods without a run before an absence alert fires. */
  readonly periods: number;
}

/** Writes `body` as JSON to `file` in the output directory: its full path. */
type WriteResource = (file: string, body: object) => string;

/** The command's arguments, or `help` for `--help`. @throws {UsageError} for a bad argument. */
function alertArgs(argv: string[]): AlertArgs | 'help' {
  const { values: args } = parseArgs({
    args: argv,
    options: {
      function: { type: 'string' },
      out: { type: 'string' },
      channels: { type: 'string' },
      'absence-periods': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (args.help) {
    return 'help';
  }
  const periods = Number(args['absence-periods'] ?? 2);
  if (!args.function || !args.out) {
    throw new UsageError('--function and --out are required');
  }
  if (!Number.isInteger(periods) || periods < 1) {
    throw new UsageError(
      `--absence-periods "${args['absence-periods']}" is not a whole number ≥ 1`,
    );
  }
  const channels = (args.channels ?? '').split(',').filter((c) => c !== '');
  return { functionName: args.function, out: args.out, channels, periods };
}

/** Writes each log-based metric and the dashboard: their lines for `deploy.sh`. */
function metricAndDashboardLines(
  functionName: string,
  write: WriteResource,
): string[] {
  const lines: string[] = [];
  for (const kind of Object.keys(METRICS) as MetricKind[]) {
    const metric = logMetric(functionName, kind);
    lines.push(
      ['metric', metric.name, write(`metric-${kind}.json`, metric)].join('\t'),
    );
  }
  const board = dashboard(functionName);
  lines.push(
    ['dashboard', board.displayName, write('dashboard.json', board)].join('\t'),
  );
  return lines;
}

/** With channels, writes each job's alert policy: their lines (or why a job has none) for `deploy.sh`. */
function policyLines(
  args: AlertArgs,
  jobs: Awaited<ReturnType<typeof loadJobs>>,
  write: WriteResource,
): string[] {
  const { functionName, channels, periods } = args;
  if (channels.length === 0) {
    return [];
  }
  const now = new Date();
  const alerted = jobs.map((job) => ({
    id: job.id,
    periodSeconds: Math.ceil((longestGapMs(job, now) ?? 0) / 1000),
  }));
  const plans = alertPolicies(functionName, alerted, [...channels], periods);
  return plans.map((plan, i) =>
    plan.kind === 'policy'
      ? [
          'policy',
          plan.displayName,
          write(`policy-${i}.json`, plan.policy),
        ].join('\t')
      : ['skipped', plan.job, plan.reason].join('\t'),
  );
}

if (isEntryPoint(import.meta.url)) {
  await runCommand('alerts', USAGE, main);
}
