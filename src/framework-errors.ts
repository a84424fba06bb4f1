/**
 * functions-framework parses every request body before it calls the function, and leaves a body it
 * cannot parse (e.g. `Content-Type: application/json` with text that is not JSON) to Express's
 * default handler. That handler answers an HTML page and logs the whole error with `console.error`,
 * raw body included (functions-framework-nodejs#686). This module gives those requests the
 * function's own JSON 400 and a log line without the body.
 *
 * functions-framework exposes no hook for it, so this patches `handle` of the Express application
 * prototype that functions-framework loads, before functions-framework creates its app (it does so
 * after loading the function's module). The fault suite checks the result through a real process.
 */
import { createRequire } from 'node:module';
import type { Logger } from 'pino';

type Handle = (req: unknown, res: unknown, callback?: (err?: unknown) => void) => unknown;

interface MinimalResponse {
  headersSent: boolean;
  status(code: number): { json(body: unknown): unknown };
}

/** Messages by body-parser error type: none quotes the body. */
const MESSAGES: Record<string, string> = {
  'entity.parse.failed':
    'The request body is not valid for its Content-Type. Cloud Scheduler needs no body: send none, or send valid JSON.',
  'entity.too.large': 'The request body is too large.',
  'encoding.unsupported': 'The Content-Encoding of the request body is not supported.',
  'charset.unsupported': 'The charset of the request body is not supported.',
  'request.aborted': 'The request was aborted before its body arrived.',
  'request.size.invalid': 'The request body is shorter or longer than its Content-Length.',
};

let installed = false;

/**
 * Routes errors raised before the function runs (body parsing) to a JSON response
 * `{outcome: "invalid_request", message}` with the error's 4xx status, logged at warning level
 * without the body. Call once, at module load, before functions-framework starts its server;
 * later calls do nothing.
 */
export function answerFrameworkErrorsAsJson(logger: Logger): void {
  if (installed) return;
  installed = true;
  const fromHere = createRequire(import.meta.url);
  const fromFramework = createRequire(fromHere.resolve('@google-cloud/functions-framework'));
  const application = (fromFramework('express') as { application: { handle: Handle } }).application;
  const handle = application.handle;
  application.handle = function (this: unknown, req, res, callback) {
    return handle.call(
      this,
      req,
      res,
      callback ?? ((err) => answer(err, res as MinimalResponse, logger)),
    );
  };
}

function answer(err: unknown, res: MinimalResponse, logger: Logger): void {
  const { status, statusCode, type } = (err ?? {}) as {
    status?: number;
    statusCode?: number;
    type?: string;
  };
  const code = err === undefined ? 404 : (status ?? statusCode ?? 500);
  const clientError = code >= 400 && code < 500;
  const message =
    err === undefined
      ? 'Not found.'
      : ((type && MESSAGES[type]) ??
        (clientError
          ? 'The request body could not be read: check its Content-Type and Content-Encoding.'
          : 'Internal error; retry later.'));
  logger[clientError ? 'warn' : 'error'](
    { outcome: clientError ? 'invalid_request' : 'failed', status: code, errorType: type },
    `request refused before the function ran: ${message}`,
  );
  if (!res.headersSent) {
    res
      .status(clientError ? code : 500)
      .json({ outcome: clientError ? 'invalid_request' : 'failed', message });
  }
}
