/** The wiring of one scheduled-job function; `index.ts` calls it with the user's jobs. */
import { Firestore } from '@google-cloud/firestore';
import * as functions from '@google-cloud/functions-framework';
import type { Logger } from 'pino';
import { ConfigError } from '../core/errors.ts';
import { RunLedger } from '../core/ledger.ts';
import { RunDocuments } from '../core/run-documents.ts';
import {
  CATCH_UP_UNREACHABLE,
  catchUpWarnings,
} from '../policy/catch-up-warnings.ts';
import {
  type DeclaredJob,
  type JobDeclaration,
  validateJobs,
} from '../policy/job-declaration.ts';
import { jobStateCollection } from '../policy/job-state.ts';
import { RunHistory } from '../policy/run-history.ts';
import { retentionProblems } from '../policy/schedule-time.ts';
import { createOidcAuthenticator } from './auth.ts';
import { type Config, loadConfig } from './config.ts';
import { installFrameworkWorkarounds } from './framework-workarounds.ts';
import { createScheduledJobHandler } from './handler.ts';
import { createLogger } from './logger.ts';
import { drainOnShutdown, GracefulShutdown } from './shutdown.ts';
import {
  type DeliveryTracer,
  deferredTracer,
  loadTracer,
  type TracingConfig,
  tracingConfigOf,
} from './tracing.ts';

/**
 * The configuration read from `env` (`process.env` if not given) and the declared jobs, checked
 * alone and as a pair.
 * @throws {ConfigError} listing every problem of both (and of the pair) at once.
 */
export function loadConfigAndJobs(
  declarations: readonly JobDeclaration[],
  env?: Readonly<Record<string, string | undefined>>,
): {
  readonly config: Config;
  readonly jobs: readonly DeclaredJob[];
  /** The OpenTelemetry settings (docs/tracing.md); `undefined`: tracing is off. */
  readonly tracing?: TracingConfig;
} {
  const problems: string[] = [];
  const attempt = <T>(load: () => T): T | undefined => {
    try {
      return load();
    } catch (err) {
      if (!(err instanceof ConfigError)) {
        throw err;
      }
      problems.push(...err.problems);
      return undefined;
    }
  };
  const config = attempt(() => loadConfig(env));
  const jobs = attempt(() => validateJobs(declarations));
  const tracing = attempt(() => tracingConfigOf(env ?? process.env));
  if (config !== undefined && jobs !== undefined) {
    problems.push(
      ...retentionProblems(
        jobs,
        config.retentionMs,
        config.forcedRunToleranceMs,
      ),
    );
  }
  if (config === undefined || jobs === undefined || problems.length > 0) {
    throw new ConfigError(problems);
  }
  return tracing === undefined ? { config, jobs } : { config, jobs, tracing };
}

/** The configuration and the jobs, or exit listing every problem of both (and of the pair). */
function loadOrExit(declarations: readonly JobDeclaration[]) {
  try {
    return loadConfigAndJobs(declarations);
  } catch (err) {
    if (!(err instanceof ConfigError)) {
      throw err;
    }
    console.error(err.message);
    process.exit(1);
  }
}

/**
 * Loads OpenTelemetry while the instance starts (a dynamic import: with tracing off nothing of it
 * is loaded); deliveries wait for it. If it cannot load (not installed), logs why and how to
 * install it, and exits 1.
 */
function startTracing(
  tracing: TracingConfig,
  config: Config,
  logger: Logger,
): DeliveryTracer {
  const instance = {
    serviceName: config.serviceName,
    projectId: config.projectId,
  };
  const loading = loadTracer(tracing, instance);
  loading.catch((err: unknown) => {
    logger.error({ err }, (err as Error).message);
    process.exit(1);
  });
  return deferredTracer(loading);
}

/** What one function instance is built of: its settings, jobs, store and logger. */
export interface InstanceParts {
  readonly config: Config;
  readonly jobs: readonly DeclaredJob[];
  readonly firestore: Firestore;
  readonly logger: Logger;
  readonly shutdown?: GracefulShutdown;
  readonly tracer?: DeliveryTracer;
}

/**
 * The HTTP handler of one function instance over `parts.firestore`, wired as every instance is:
 * the run ledger, the history and the job documents in `config.runsCollection`, Firestore's clock,
 * and the caller check `AUTH_MODE=verify-oidc` asks for. Also returns the run documents, whose
 * `connect` warms the client.
 */
export function createInstanceHandler(parts: InstanceParts) {
  const { config, jobs, firestore, logger, shutdown, tracer } = parts;
  const { retentionMs, firestoreTimeoutMs: timeoutMs } = config;
  const documentsOf = (collection: string) =>
    new RunDocuments(firestore, { collection, retentionMs, timeoutMs });
  const documents = documentsOf(config.runsCollection);
  const ledger = new RunLedger(documents, { leaseMs: config.leaseMs });
  const jobDocuments = documentsOf(jobStateCollection(config.runsCollection));
  const {
    oidcAudience: audience,
    oidcInvokers: invokers,
    oidcCertsUrl: certsUrl,
  } = config;
  const oidc =
    config.authMode === 'verify-oidc'
      ? { audience, invokers, certsUrl }
      : undefined;
  const authenticate = oidc && createOidcAuthenticator(oidc);
  const deps = {
    config,
    ledger,
    history: new RunHistory(documents),
    jobDocuments,
    jobs,
    logger,
  };
  const clock = () => documents.serverTime();
  warnOfUnreachableCatchUp(jobs, logger);
  const handler = createScheduledJobHandler({
    ...deps,
    clock,
    ...(authenticate === undefined ? {} : { authenticate }),
    ...(shutdown === undefined ? {} : { shutdown }),
    ...(tracer === undefined ? {} : { tracer }),
  });
  return { handler, documents };
}

/**
 * Logs each job's `catchUp` that cannot run as declared (no run audit, or a slot reported missed
 * before an audit can find it late) as WARNING {@link CATCH_UP_UNREACHABLE}, once per instance: the
 * declarations are valid, but the promise of catch-up would otherwise fail without a word.
 */
function warnOfUnreachableCatchUp(
  jobs: readonly DeclaredJob[],
  logger: Logger,
): void {
  for (const { jobName, problem } of catchUpWarnings(jobs, new Date())) {
    logger.warn({ jobName, problem }, CATCH_UP_UNREACHABLE);
  }
}

/**
 * Registers an HTTP function `name` (the `--target`) that runs each job of `declarations` (`jobs.ts`)
 * once per scheduled run, on `options.firestore` if given (tests give one with faults). Exits
 * listing every problem of the configuration and the declarations; drains running jobs on SIGTERM
 * and on an uncaught exception (then exits 16); answers unreadable bodies with JSON.
 * @throws Error if functions-framework no longer has what `framework-workarounds.ts` patches.
 */
export function registerScheduledJob(
  name: string,
  declarations: readonly JobDeclaration[],
  options: { readonly firestore?: Firestore } = {},
): void {
  const { config, jobs, tracing } = loadOrExit(declarations);
  const logger = createLogger(config);
  const tracer =
    tracing === undefined ? undefined : startTracing(tracing, config, logger);
  const { projectId, firestoreDatabase: databaseId } = config;
  const project = projectId === undefined ? {} : { projectId };
  const firestore =
    options.firestore ??
    new Firestore({ ...project, databaseId, ignoreUndefinedProperties: true });
  const shutdown = new GracefulShutdown();
  const { handler, documents } = createInstanceHandler({
    config,
    jobs,
    firestore,
    logger,
    shutdown,
    ...(tracer === undefined ? {} : { tracer }),
  });
  // Connect while the new instance waits for its first request; its clock is learnt in a request.
  installFrameworkWorkarounds(
    logger,
    () => void documents.connect().catch(() => {}),
  );
  drainOnShutdown(shutdown, config.shutdownGraceMs, logger);
  functions.http(name, handler);
}
