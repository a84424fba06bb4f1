/**
 * Every patch of functions-framework's internals, each checked at cold start: (1) JSON answers for
 * unreadable bodies, (2) signal and crash listeners set aside for a drain, (3) errors a job leaves
 * behind routed to its run's log (docs/maintenance.md, "functions-framework workarounds").
 */
import type { EventEmitter } from 'node:events';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { Logger } from 'pino';
import { loggableError } from '../core/errors.ts';
import {
  BODY_MESSAGES,
  logLevelOf,
  MESSAGES,
  STATUS_BY_OUTCOME,
} from './outcomes.ts';

type Handle = (
  req: unknown,
  res: unknown,
  callback?: (err?: unknown) => void,
) => unknown;
type Listener = (...args: unknown[]) => void;

type Res = {
  headersSent: boolean;
  status(code: number): { json(body: unknown): unknown };
};

/** The signals functions-framework exits on and this starter drains on first. */
export const SHUTDOWN_SIGNALS = ['SIGTERM', 'SIGINT'] as const;
const WATCHED = [
  ...SHUTDOWN_SIGNALS,
  'unhandledRejection',
  'uncaughtException',
] as const;

let installed = false;
const setAside = new Map<NodeJS.Signals, Listener[]>();

/** What each patch needs, by the upstream issue whose fix deletes it. */
const PATCHED = {
  '#686': "Express's application.handle",
  '#704': 'invoker.ErrorHandler.prototype.register',
};

function fail(issue: keyof typeof PATCHED): never {
  throw new Error(
    `functions-framework changed: ${PATCHED[issue]} is missing, so the workaround for functions-framework-nodejs ${issue} cannot be installed. Install the version package.json pins (npm ci), or update src/function/framework-workarounds.ts (docs/maintenance.md says how).`,
  );
}

/**
 * Installs the workarounds, before functions-framework starts its server; later calls do nothing.
 * `onListening` runs once the server listens (functions-framework registers its error handler
 * then), never when the module is only loaded, as `gcp-build` loads it.
 * @throws Error if functions-framework no longer has what a workaround patches.
 */
export function installFrameworkWorkarounds(
  logger: Logger,
  onListening = () => {},
): void {
  if (installed) {
    return;
  }
  const entry = createRequire(import.meta.url).resolve(
    '@google-cloud/functions-framework',
  );
  const fromFramework = createRequire(entry);
  const { application } = fromFramework('express') as {
    application?: { handle?: Handle };
  };
  if (typeof application?.handle !== 'function') {
    fail('#686');
  }
  const { handle } = application;
  // Not exported: load functions-framework's own module instance (same CommonJS cache entry).
  const invoker = fromFramework(join(dirname(entry), 'invoker.js')) as {
    ErrorHandler?: { prototype?: { register?: (this: unknown) => void } };
  };
  const prototype = invoker.ErrorHandler?.prototype ?? fail('#704');
  const { register } = prototype;
  if (typeof register !== 'function') {
    fail('#704');
  }
  installed = true;
  application.handle = function (this: unknown, req, res, callback) {
    const answer = (err?: unknown) =>
      answerBeforeFunction(err, res as Res, logger);
    return handle.call(this, req, res, callback ?? answer);
  };
  process.on('unhandledRejection', (reason: unknown) => {
    logger.error({ err: loggableError(reason) }, MESSAGES.unhandledRejection);
  });
  prototype.register = function (this: unknown) {
    const listeners = (event: (typeof WATCHED)[number]) =>
      process.listeners(event as NodeJS.Signals) as Listener[];
    const before = new Map(WATCHED.map((event) => [event, listeners(event)]));
    register.call(this);
    for (const event of WATCHED) {
      const added = listeners(event).filter(
        (l) => !before.get(event)?.includes(l),
      );
      for (const listener of added) {
        process.removeListener(event, listener);
      }
      if (event === 'SIGTERM' || event === 'SIGINT') {
        setAside.set(event, added);
      }
    }
    onListening();
  };
}

/**
 * Routes the errors the current request leaves behind to `logger` (docs/maintenance.md, point 3).
 * Call it synchronously in the handler, while the request's domain is the active one.
 */
export function routeRequestErrors(logger: Logger): void {
  const domain = (process as { domain?: EventEmitter | null }).domain;
  if (domain === undefined || domain === null) {
    return;
  }
  domain.removeAllListeners('error');
  domain.on('error', (err) =>
    logger.error({ err: loggableError(err) }, MESSAGES.jobLeftError),
  );
}

/** Re-installs functions-framework's signal listeners set aside by the patch. */
export function restoreFrameworkSignalListeners(): void {
  for (const [signal, listeners] of setAside) {
    for (const listener of listeners) {
      process.on(signal, listener);
    }
  }
  setAside.clear();
}

/** The outcome of an error raised before the function ran (body-parser error types). */
function outcomeOf(
  err: unknown,
  code: number,
  type?: string,
): keyof typeof STATUS_BY_OUTCOME {
  if (err === undefined) {
    return 'not_found';
  }
  if (type === 'entity.too.large') {
    return 'body_too_large';
  }
  if (type === 'encoding.unsupported' || type === 'charset.unsupported') {
    return 'unsupported_encoding';
  }
  return code >= 400 && code < 500 ? 'invalid_request' : 'failed';
}

/** Answers an error raised before the function ran (a body-parser error; none: no route). */
function answerBeforeFunction(err: unknown, res: Res, logger: Logger): void {
  type ParserError = { status?: number; statusCode?: number; type?: string };
  const { status, statusCode, type } = (err ?? {}) as ParserError;
  const code = err === undefined ? 404 : (status ?? statusCode ?? 500);
  const outcome = outcomeOf(err, code, type);
  const message =
    outcome === 'not_found'
      ? MESSAGES.notFound
      : ((type && BODY_MESSAGES[type]) ??
        (outcome === 'failed'
          ? MESSAGES.internal('')
          : MESSAGES.unreadableBody));
  const answered = STATUS_BY_OUTCOME[outcome];
  const fields = {
    outcome,
    status: answered,
    errorType: type,
    errorStatus: code,
  };
  logger[logLevelOf(outcome)](
    fields,
    `request refused before the function ran: ${message}`,
  );
  if (!res.headersSent) {
    res.status(answered).json({ outcome, message });
  }
}
