/** The wiring of one scheduled-job function; `index.ts` calls it with the user's jobs. */
import { Firestore } from '@google-cloud/firestore';
import * as functions from '@google-cloud/functions-framework';
import { ConfigError } from '../core/errors.ts';
import { RunLedger } from '../core/ledger.ts';
import { RunDocuments } from '../core/run-documents.ts';
import { type JobDeclaration, validateJobs } from '../policy/job-declaration.ts';
import { jobStateCollection } from '../policy/job-state.ts';
import { RunHistory } from '../policy/run-history.ts';
import { retentionProblems } from '../policy/schedule-time.ts';
import { createOidcAuthenticator } from './auth.ts';
import { loadConfig } from './config.ts';
import { installFrameworkWorkarounds } from './framework-workarounds.ts';
import { createScheduledJobHandler } from './handler.ts';
import { createLogger } from './logger.ts';
import { drainOnShutdown, GracefulShutdown } from './shutdown.ts';

/** The configuration and the jobs, or exit listing every problem of both (and of the pair). */
function loadOrExit(declarations: readonly JobDeclaration[]) {
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
  const config = attempt(() => loadConfig());
  const jobs = attempt(() => validateJobs(declarations));
  if (config !== undefined && jobs !== undefined) {
    problems.push(...retentionProblems(jobs, config.retentionMs, config.forcedRunToleranceMs));
  }
  if (config === undefined || jobs === undefined || problems.length > 0) {
    console.error(new ConfigError(problems).message);
    process.exit(1);
  }
  return { config, jobs };
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
  const { config, jobs } = loadOrExit(declarations);
  const logger = createLogger(config);
  const { projectId, firestoreDatabase: databaseId } = config;
  const project = projectId === undefined ? {} : { projectId };
  const firestore =
    options.firestore ?? new Firestore({ ...project, databaseId, ignoreUndefinedProperties: true });
  const { retentionMs, firestoreTimeoutMs: timeoutMs } = config;
  const documentsOf = (collection: string) =>
    new RunDocuments(firestore, { collection, retentionMs, timeoutMs });
  const documents = documentsOf(config.runsCollection);
  const ledger = new RunLedger(documents, { leaseMs: config.leaseMs });
  const jobDocuments = documentsOf(jobStateCollection(config.runsCollection));
  // Connect while the new instance waits for its first request; its clock is learnt in a request.
  installFrameworkWorkarounds(logger, () => void documents.connect().catch(() => {}));
  const shutdown = new GracefulShutdown();
  drainOnShutdown(shutdown, config.shutdownGraceMs, logger);
  const { oidcAudience: audience, oidcInvokers: invokers, oidcCertsUrl: certsUrl } = config;
  const oidc = config.authMode === 'verify-oidc' ? { audience, invokers, certsUrl } : undefined;
  const authenticate = oidc && createOidcAuthenticator(oidc);
  const deps = { config, ledger, history: new RunHistory(documents), jobDocuments, jobs, logger };
  const clock = () => documents.serverTime();
  functions.http(name, createScheduledJobHandler({ ...deps, clock, authenticate, shutdown }));
}
