/**
 * What the scheduled-job handler needs (`createScheduledJobHandler`): its own module, so the
 * handler and the decision steps it calls (`decide.ts`) both read it without importing each other.
 */

import type { Request } from '@google-cloud/functions-framework';
import type { Logger } from 'pino';
import type { Ledger } from '../core/ledger.ts';
import type { RunDocuments } from '../core/run-documents.ts';
import type { DeclaredJob } from '../policy/job-declaration.ts';
import type { CatchUpSender } from '../policy/late-runs.ts';
import type { RunHistory } from '../policy/run-history.ts';
import type { Authenticator } from './auth.ts';
import type { Config } from './config.ts';
import type { GracefulShutdown } from './shutdown.ts';
import type { DeliveryTracer } from './tracing.ts';

/** What `createScheduledJobHandler` needs. */
export interface HandlerDeps {
  readonly config: Config;
  readonly ledger: Ledger;
  /** Where the overlap policy and missed-run detection read and report. */
  readonly history: Pick<
    RunHistory,
    | 'getMany'
    | 'reportMissed'
    | 'markReported'
    | 'claimRelog'
    | 'acknowledgeReport'
    | 'recordSkipped'
  >;
  readonly jobDocuments: RunDocuments;
  /** Firestore's time (`RunDocuments.serverTime`), once per delivery: the clock leases use. */
  readonly clock: () => Promise<Date>;
  /** The declared jobs (`validateJobs(jobs)` from `jobs.ts`): a delivery runs the one it names. */
  readonly jobs: readonly DeclaredJob[];
  readonly logger: Logger;
  /** Checks the caller first (`AUTH_MODE=verify-oidc`). */
  readonly authenticate?: Authenticator;
  readonly shutdown?: GracefulShutdown;
  /** The ID token of a catch-up delivery (`catch-up-delivery.ts`); default: the metadata server's. */
  readonly idToken?: (audience: string) => Promise<string>;
  /** Spans of each delivery and its steps (docs/tracing.md); none unless given. */
  readonly tracer?: DeliveryTracer;
  /**
   * How the run audit delivered by `auditRequest` catches up a late slot; default: a request to
   * the audit's own URL (`catch-up-delivery.ts`). The simulator delivers in-process instead.
   */
  readonly catchUpSender?: (auditRequest: Request) => CatchUpSender;
}
