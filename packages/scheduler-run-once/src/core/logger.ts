/**
 * The logger the core writes to: the few methods it calls, so the core needs no logging library.
 * pino's `Logger` satisfies it (the function passes one); a test may pass any object that does.
 */

/** One log method: a message, or an object of fields and a message (pino's argument order). */
export interface LogMethod {
  (message: string): void;
  (fields: object, message?: string): void;
}

/**
 * A structured logger: the levels the core uses, and `child` for a logger whose every line carries
 * `bindings` (a run's id, an attempt's id), which jobs use through `ctx.logger`.
 *
 * @example logger.child({ runId }).warn({ fence: 'completion' }, 'lease lost');
 */
export interface Logger {
  readonly debug: LogMethod;
  readonly info: LogMethod;
  readonly warn: LogMethod;
  readonly error: LogMethod;
  child(bindings: Record<string, unknown>): Logger;
}
