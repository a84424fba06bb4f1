/** The policies' errors, in the project's one family (`RunOnceError`, `core/errors.ts`). */
import { RunOnceError } from '../core/errors.ts';

/** Bad configuration found at cold start: `problems` lists every one, the message one per line. */
export class ConfigError extends RunOnceError {
  override name = 'ConfigError';
  readonly problems: readonly string[];
  constructor(problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.problems = problems;
  }
}
