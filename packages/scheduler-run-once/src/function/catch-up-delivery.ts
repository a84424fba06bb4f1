/**
 * The run audit's own delivery of a late slot (catch-up): a request to this function, sent the
 * way Cloud Scheduler sends one and authenticated the same way, that the audit waits on only until
 * the run is claimed (Cloud Run throttles the CPU outside requests, so the run needs its own).
 */
import type { Request } from '@google-cloud/functions-framework';
import type { DeclaredJob } from '../policy/job-declaration.ts';
import type { CatchUpSender, CatchUpSent } from '../policy/late-runs.ts';
import { toUtcRfc3339 } from '../policy/schedule.ts';
import type { HandlerDeps } from './handler-deps.ts';
import {
  CATCH_UP_HEADER,
  JOB_NAME_HEADER,
  SCHEDULE_TIME_HEADER,
} from './scheduler-request.ts';

/** How long the audit waits for a caught-up run's claim, ms, before it goes on without it. */
export const CLAIM_WAIT_MS = 30_000;
/** How often the audit reads the run's record while it waits, ms. */
const CLAIM_POLL_MS = 500;
/** The user agent of a catch-up delivery, so logs and proxies tell it from Scheduler's. */
export const CATCH_UP_USER_AGENT = 'scheduler-run-once-catch-up';

/**
 * The path at which development's local OIDC issuer (`ops/oidc-issuer.ts`) mints a token
 * (`?audience=…&email=…`), as the metadata server's identity endpoint does on Cloud Run.
 */
export const TOKEN_PATH = '/token';

/** Fetches an ID token for `audience` as this function's service account (google-auth-library). */
export type IdTokenSource = (audience: string) => Promise<string>;

/** The default {@link IdTokenSource}: the metadata server's token, loaded only when first used. */
async function metadataIdToken(audience: string): Promise<string> {
  const { GoogleAuth } = await import('google-auth-library');
  const client = await new GoogleAuth().getIdTokenClient(audience);
  return client.idTokenProvider.fetchIdToken(audience);
}

/**
 * The {@link IdTokenSource} of development's local issuer (`npm run dev` with
 * `AUTH_MODE=verify-oidc`, `OIDC_CERTS_URL` set; config.ts refuses it outside development): the
 * token its server mints for `email`, the invoker the function accepts, as the metadata server
 * would give a deployed function its account's.
 */
function localIssuerIdToken(certsUrl: string, email: string): IdTokenSource {
  return async (audience) => {
    const url = new URL(TOKEN_PATH, certsUrl);
    url.searchParams.set('audience', audience);
    url.searchParams.set('email', email);
    const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    if (!res.ok) {
      throw new Error(
        `the local issuer at ${url.origin} answered ${res.status}`,
      );
    }
    return res.text();
  };
}

/** The ID tokens of this function's catch-up deliveries: the local issuer's in development. */
function idTokenSourceOf(config: HandlerDeps['config']): IdTokenSource {
  const certsUrl = config.oidcCertsUrl;
  const invoker = config.oidcInvokers?.[0];
  if (certsUrl === undefined || invoker === undefined) {
    return metadataIdToken;
  }
  return localIssuerIdToken(certsUrl, invoker);
}

/**
 * Where the audit was delivered: its URL as the caller used it (`X-Forwarded-Proto` behind Cloud
 * Run's front end), query included (a key scope's parameters), and the token audience Scheduler
 * used for it: `OIDC_AUDIENCE` under `AUTH_MODE=verify-oidc`, else the URL without its query, and
 * without the path when that is only `/`, as `deploy.sh` gives Scheduler the service's URL
 * (`https://NAME-HASH.REGION.run.app`, no slash); a function addressed by path
 * (`https://REGION-PROJECT.cloudfunctions.net/NAME`) keeps it. Cloud Run takes "the full URL of
 * the target service" as the audience (https://cloud.google.com/run/docs/configuring/custom-audiences).
 */
function auditTarget(req: Request, deps: Pick<HandlerDeps, 'config'>) {
  const forwarded = req.get('x-forwarded-proto')?.split(',')[0]?.trim();
  const protocol =
    forwarded === undefined || forwarded === '' ? req.protocol : forwarded;
  const url = new URL(req.originalUrl, `${protocol}://${req.get('host')}`);
  const { config } = deps;
  const audience =
    config.authMode === 'verify-oidc' && config.oidcAudience !== ''
      ? config.oidcAudience
      : serviceAudience(url);
  return { url, audience };
}

/** The audience of a token for the service at `url`: its origin, and its path unless only `/`. */
function serviceAudience(url: URL): string {
  const path = url.pathname === '/' ? '' : url.pathname;
  return `${url.origin}${path}`;
}

/** The headers of a catch-up delivery of `slot`: Scheduler's, the audit's scope headers, the mark. */
function catchUpHeaders(
  req: Request,
  deps: Pick<HandlerDeps, 'config'>,
  job: DeclaredJob,
  slot: Date,
): Record<string, string> {
  const headers: Record<string, string> = {
    [JOB_NAME_HEADER]: job.id,
    [SCHEDULE_TIME_HEADER]: toUtcRfc3339(slot),
    [CATCH_UP_HEADER]: 'true',
    'User-Agent': CATCH_UP_USER_AGENT,
  };
  for (const name of deps.config.keyScopeHeaders) {
    const value = req.get(name);
    if (value !== undefined) {
      headers[name] = value;
    }
  }
  return headers;
}

/** What a catch-up delivery needs: the configuration, a read of the run, and its ID tokens. */
export interface CatchUpDeps extends Pick<HandlerDeps, 'config'> {
  readonly history: Pick<HandlerDeps['history'], 'getMany'>;
  readonly idToken?: IdTokenSource | undefined;
}

/**
 * The sender of the audit delivered by `req`: it POSTs each catch-up to the audit's own URL, with
 * an ID token when the audit came with one (a deployed, private function), and resolves once the
 * run's record shows a claim or the function answered, at most {@link CLAIM_WAIT_MS} later.
 */
export function catchUpSender(deps: CatchUpDeps, req: Request): CatchUpSender {
  const { url, audience } = auditTarget(req, deps);
  const authenticated = req.get('authorization') !== undefined;
  const idToken = deps.idToken ?? idTokenSourceOf(deps.config);
  return async (job, slot, runId): Promise<CatchUpSent> => {
    const headers = catchUpHeaders(req, deps, job, slot);
    try {
      if (authenticated) {
        headers.Authorization = `Bearer ${await idToken(audience)}`;
      }
    } catch (err) {
      return {
        result: 'unsent',
        reason: `no ID token for ${audience}: ${String(err)}`,
      };
    }
    // A retry's record already has attempts: only a newer one is this delivery's claim.
    const attemptsBefore = (await attemptsOf(deps, runId)) ?? 0;
    const answered = postCatchUp(url, headers, job);
    return waitForClaim(deps, runId, answered, attemptsBefore);
  };
}

/** POSTs the delivery; resolves with its outcome, or `unsent` if it could not be sent. */
async function postCatchUp(
  url: URL,
  headers: Record<string, string>,
  job: DeclaredJob,
): Promise<CatchUpSent> {
  // The run may take the job's whole attempt deadline; the audit never waits that long.
  const timeoutMs = job.attemptDeadlineSeconds * 1000 + CLAIM_WAIT_MS;
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const body = (await res.json().catch(() => ({}))) as { outcome?: unknown };
    const outcome =
      typeof body.outcome === 'string' ? body.outcome : `HTTP ${res.status}`;
    return { result: 'answered', outcome };
  } catch (err) {
    const reason =
      (err as Error).cause instanceof Error
        ? ((err as Error).cause as Error).message
        : String(err);
    return { result: 'unsent', reason };
  }
}

/** The attempts the run's record counts: 0 for none, `undefined` if unreadable or not read. */
async function attemptsOf(
  deps: Pick<CatchUpDeps, 'history'>,
  runId: string,
): Promise<number | undefined> {
  const read = await deps.history.getMany([runId]).catch(() => undefined);
  if (read === undefined) {
    return undefined;
  }
  const record = read.records.get(runId);
  if (record === undefined) {
    return 0;
  }
  return record.status === 'unreadable' ? undefined : record.attempts;
}

/**
 * Resolves with `answered` as soon as it does, or `claimed` once the run's record has an attempt
 * more than `attemptsBefore` (those of earlier deliveries: a retry's record already has some),
 * or `unsent` after {@link CLAIM_WAIT_MS} without either (the simulator's sender waits the same way).
 */
export async function waitForClaim(
  deps: Pick<CatchUpDeps, 'history'>,
  runId: string,
  answered: Promise<CatchUpSent>,
  attemptsBefore = 0,
): Promise<CatchUpSent> {
  let done: CatchUpSent | undefined;
  const settled = answered.then((sent) => {
    done = sent;
    return sent;
  });
  const deadline = performance.now() + CLAIM_WAIT_MS;
  while (done === undefined && performance.now() < deadline) {
    const tick = new Promise((resolve) => setTimeout(resolve, CLAIM_POLL_MS));
    await Promise.race([settled, tick]);
    if (done !== undefined) {
      break;
    }
    const attempts = await attemptsOf(deps, runId);
    if (attempts !== undefined && attempts > attemptsBefore) {
      return { result: 'claimed' };
    }
  }
  return (
    done ?? { result: 'unsent', reason: `no claim within ${CLAIM_WAIT_MS} ms` }
  );
}
