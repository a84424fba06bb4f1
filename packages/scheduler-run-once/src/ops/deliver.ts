/**
 * Deliveries by hand, for `npm run trigger` and `npm run runs -- --backfill`: the headers Cloud
 * Scheduler sends, to the local function or a deployed one, authenticated there as Scheduler is
 * (an OIDC ID token of the invoker service account, audience = the function URL).
 */
import { execFileSync } from 'node:child_process';
import {
  JOB_NAME_HEADER,
  SCHEDULE_TIME_HEADER,
} from '../function/scheduler-request.ts';
import { toUtcRfc3339 } from '../policy/schedule.ts';
import { CommandError, UsageError } from './command.ts';

/** Where deliveries go, and the bearer token they carry (none for a local function). */
export interface DeliveryTarget {
  readonly url: string;
  readonly token: string | undefined;
}

/** What the function answered. */
export interface Answer {
  readonly status: number;
  readonly outcome: string;
  readonly runId: string | undefined;
  readonly message: string;
}

const DELIVERY_TIMEOUT_MS = 30 * 60_000; // Scheduler's longest attempt deadline

function isLocal(url: URL): boolean {
  return ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
}

/**
 * Resolves where to deliver and with which token: `url` (default the local function,
 * `http://localhost:PORT/`), and for a deployed one an ID token: `token` as given, else
 * `gcloud auth print-identity-token --impersonate-service-account=INVOKER --audiences=URL` (your
 * account needs `roles/iam.serviceAccountTokenCreator` on the invoker; `deploy.sh` names it
 * `FUNCTION_NAME-invoker@PROJECT.iam.gserviceaccount.com`).
 *
 * @throws {UsageError} if `--url` is not a URL.
 * @throws {CommandError} saying what to pass when a deployed URL has neither a token nor an
 * invoker, or when gcloud could not print a token (its own message is on stderr above).
 */
export function resolveTarget(
  options: {
    url?: string | undefined;
    token?: string | undefined;
    invoker?: string | undefined;
  },
  env: NodeJS.ProcessEnv,
): DeliveryTarget {
  const text = options.url ?? `http://localhost:${env.PORT ?? 8080}/`;
  const url = URL.parse(text);
  if (url === null) {
    throw new UsageError(`--url ${JSON.stringify(text)} is not a URL`);
  }
  const token = options.token ?? env.ID_TOKEN;
  if (token !== undefined || isLocal(url)) {
    return { url: url.href, token };
  }
  const invoker = options.invoker ?? env.INVOKER_SA_EMAIL;
  if (invoker === undefined) {
    throw new CommandError(
      `${url.origin} needs an ID token: pass --invoker SERVICE_ACCOUNT_EMAIL (the Scheduler jobs' invoker, e.g. scheduler-run-once-invoker@PROJECT.iam.gserviceaccount.com) or --token TOKEN`,
    );
  }
  const args = [
    'auth',
    'print-identity-token',
    `--impersonate-service-account=${invoker}`,
    `--audiences=${url.origin}`,
    '--quiet',
  ];
  try {
    const printed = execFileSync('gcloud', args, {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    return { url: url.href, token: printed.trim() };
  } catch {
    throw new CommandError(
      `gcloud auth print-identity-token --impersonate-service-account=${invoker} failed (its message is above)`,
    );
  }
}

/**
 * The headers Scheduler sends for slot `scheduleTime` of job `jobId`, plus `extra`.
 *
 * @example schedulerHeaders('nightly-report', new Date('2026-10-16T12:00:00Z'))
 */
export function schedulerHeaders(
  jobId: string,
  scheduleTime: Date,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    [JOB_NAME_HEADER]: jobId,
    [SCHEDULE_TIME_HEADER]: toUtcRfc3339(scheduleTime),
    'User-Agent': 'Google-Cloud-Scheduler',
    ...extra,
  };
}

/**
 * POSTs one delivery and reads the function's JSON answer.
 *
 * @param query - query parameters set on the target URL (a key scope's `RUN_KEY_SCOPE_PARAMS`,
 *   as Scheduler's job URL carries them), replacing any the URL has of the same name.
 * @throws {CommandError} if the function cannot be reached.
 */
export async function deliver(
  target: DeliveryTarget,
  headers: Record<string, string>,
  query: Readonly<Record<string, string>> = {},
): Promise<Answer> {
  const url = new URL(target.url);
  for (const [name, value] of Object.entries(query)) {
    url.searchParams.set(name, value);
  }
  const res = await fetch(url, {
    method: 'POST',
    headers:
      target.token === undefined
        ? headers
        : { ...headers, Authorization: `Bearer ${target.token}` },
    signal: AbortSignal.timeout(DELIVERY_TIMEOUT_MS),
  }).catch((err: Error) => {
    const why = (err.cause as Error | undefined)?.message ?? err.message;
    throw new CommandError(
      `could not reach ${target.url} (${why}): is the function running (npm run dev), or is --url right?`,
    );
  });
  const text = await res.text();
  let body: { outcome?: unknown; runId?: unknown; message?: unknown } = {};
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    body = { message: text.slice(0, 200) };
  }
  return {
    status: res.status,
    outcome: typeof body.outcome === 'string' ? body.outcome : '-',
    runId: typeof body.runId === 'string' ? body.runId : undefined,
    message: typeof body.message === 'string' ? body.message : '',
  };
}

/** One line for people: `<what>: <status> <outcome> <runId> <message>`. */
export function answerLine(what: string, answer: Answer): string {
  return `${what}: ${answer.status} ${answer.outcome}${answer.runId ? ` ${answer.runId.slice(0, 12)}…` : ''} ${answer.message}`;
}
