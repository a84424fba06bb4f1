/** The HTTP adapter's error, in the project's one family (`RunOnceError`, `core/errors.ts`). */
import { RunOnceError } from '../core/errors.ts';

/**
 * A delivery that cannot name a scheduled run (missing, malformed, oversized or repeated
 * `X-CloudScheduler-*` or scope headers), thrown by `scheduler-request.ts`. The HTTP adapter
 * answers 400 and writes nothing.
 */
export class InvalidRequestError extends RunOnceError {
  override name = 'InvalidRequestError';
}
