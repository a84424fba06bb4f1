/** The HTTP adapter's error, in the project's one family (`RunOnceError`, `core/errors.ts`). */
import { RunOnceError } from '../core/errors.ts';

/** A delivery whose headers name no scheduled run (`scheduler-request.ts`): 400, nothing written. */
export class InvalidRequestError extends RunOnceError {
  override name = 'InvalidRequestError';
}
