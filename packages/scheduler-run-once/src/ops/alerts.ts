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
 * Reads the declarations like `npm run jobs` (`JOBS_MODULE`). Exit 1 on invalid declarations,
 * 2 on bad arguments.
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
    console.log(USAGE);
    return 0;
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
  const jobs = await loadJobs(env);
  mkdirSync(args.out, { recursive: true });
  const write = (file: string, body: object) => {
    const full = path.resolve(args.out as string, file);
    writeFileSync(full, `${JSON.stringify(body, null, 2)}\n`);
    return full;
  };
  const lines: string[] = [];
  for (const kind of Object.keys(METRICS) as MetricKind[]) {
    const metric = logMetric(args.function, kind);
    lines.push(
      ['metric', metric.name, write(`metric-${kind}.json`, metric)].join('\t'),
    );
  }
  const board = dashboard(args.function);
  lines.push(
    ['dashboard', board.displayName, write('dashboard.json', board)].join('\t'),
  );
  const channels = (args.channels ?? '').split(',').filter((c) => c !== '');
  if (channels.length > 0) {
    const now = new Date();
    const alerted = jobs.map((job) => ({
      id: job.id,
      periodSeconds: Math.ceil((longestGapMs(job, now) ?? 0) / 1000),
    }));
    for (const [i, plan] of alertPolicies(
      args.function,
      alerted,
      channels,
      periods,
    ).entries()) {
      lines.push(
        plan.kind === 'policy'
          ? [
              'policy',
              plan.displayName,
              write(`policy-${i}.json`, plan.policy),
            ].join('\t')
          : ['skipped', plan.job, plan.reason].join('\t'),
      );
    }
  }
  console.log(lines.join('\n'));
  return 0;
}

if (isEntryPoint(import.meta.url)) {
  await runCommand('alerts', USAGE, main);
}
