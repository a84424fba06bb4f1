/**
 * The wiring of one scheduled-job function: configuration, logger, Firestore client, ledger,
 * graceful shutdown, optional OIDC verification, and registration with functions-framework.
 * `index.ts` calls it with the user's job; tests and benchmarks call it with their own.
 */
import { Firestore } from '@google-cloud/firestore';
import * as functions from '@google-cloud/functions-framework';
import { createOidcAuthenticator } from './auth.ts';
import { type Config, loadConfig } from './config.ts';
import { ConfigError } from './errors.ts';
import { installFrameworkWorkarounds } from './framework-workarounds.ts';
import { createScheduledJobHandler, type HandlerDeps } from './handler.ts';
import { RunLedger } from './ledger.ts';
import { createLogger } from './logger.ts';
import { drainOnSignals, GracefulShutdown } from './shutdown.ts';

/** Options of {@link registerScheduledJob}. */
export interface RegisterOptions {
  /** The environment to configure from; `process.env` unless given. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** A Firestore client to use instead of one built from the configuration. */
  readonly firestore?: Firestore;
}

function loadConfigOrExit(env: RegisterOptions['env']): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    // Cold start fails with every problem listed, readable in the revision's logs.
    console.error(err.message);
    process.exit(1);
  }
}

/**
 * Registers an HTTP function `name` that runs `job` once per scheduled run. Reads the configuration
 * (exits the process with every problem listed if it is invalid), drains running jobs on SIGTERM,
 * and answers unreadable bodies with JSON 400s.
 *
 * @param name - the functions-framework target (`--target`).
 * @param job - the work, with the contract of `runJobLogic` in `job.ts`.
 * @throws Error if functions-framework no longer has what `framework-workarounds.ts` patches.
 * @example
 * registerScheduledJob('handleScheduledJob', runJobLogic);
 */
export function registerScheduledJob(
  name: string,
  job: HandlerDeps['job'],
  options: RegisterOptions = {},
): void {
  const config = loadConfigOrExit(options.env);
  const logger = createLogger(config);
  const firestore =
    options.firestore ??
    new Firestore({
      ...(config.projectId === undefined ? {} : { projectId: config.projectId }),
      databaseId: config.firestoreDatabase,
      ignoreUndefinedProperties: true,
    });
  const ledger = new RunLedger(firestore, {
    collection: config.runsCollection,
    leaseMs: config.leaseMs,
    retentionMs: config.retentionMs,
    timeoutMs: config.firestoreTimeoutMs,
  });
  installFrameworkWorkarounds(logger);
  const shutdown = new GracefulShutdown();
  drainOnSignals(shutdown, config.shutdownGraceMs, logger);
  const authenticate =
    config.authMode === 'verify-oidc'
      ? createOidcAuthenticator({ audience: config.oidcAudience, invokers: config.oidcInvokers })
      : undefined;
  functions.http(
    name,
    createScheduledJobHandler({ config, ledger, job, logger, authenticate, shutdown }),
  );
}
