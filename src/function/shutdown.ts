/**
 * Graceful shutdown. Cloud Run sends SIGTERM and, 10 s later, SIGKILL. On SIGTERM the running jobs'
 * signals abort (reason `shutdown`); a job that stops and throws has its claim released (fenced), so
 * the next delivery runs at once on another instance instead of waiting out the lease.
 */
import type { Logger } from 'pino';
import {
  restoreFrameworkSignalListeners,
  SHUTDOWN_SIGNALS,
  type ShutdownSignal,
} from './framework-workarounds.ts';

/** Tracks the requests in flight and aborts their jobs when the instance shuts down. */
export class GracefulShutdown {
  readonly #controller = new AbortController();
  readonly #inflight = new Set<Promise<unknown>>();

  /** Aborted when shutdown begins; give it to every attempt. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Tracks `work` until it settles; returns it unchanged. */
  track<T>(work: Promise<T>): Promise<T> {
    this.#inflight.add(work);
    const forget = () => this.#inflight.delete(work);
    work.then(forget, forget);
    return work;
  }

  /**
   * Aborts every job's signal, then waits until the tracked requests settle or `graceMs` passes.
   *
   * @param graceMs - the longest wait, ms; keep it under Cloud Run's 10 s.
   * @returns how many requests were still running when the wait ended.
   */
  async drain(graceMs: number): Promise<number> {
    this.#controller.abort();
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, graceMs);
    });
    await Promise.race([Promise.allSettled([...this.#inflight]), grace]);
    clearTimeout(timer);
    return this.#inflight.size;
  }
}

/**
 * Drains `shutdown` on SIGTERM or SIGINT, then lets the process end as it would have: the
 * functions-framework listeners that `framework-workarounds.ts` set aside are re-installed and the
 * signal is raised again for them; with none (a test server), the signal's default action ends the
 * process.
 *
 * @param graceMs - the longest drain, ms.
 * @example
 * drainOnSignals(shutdown, config.shutdownGraceMs, logger);
 */
export function drainOnSignals(shutdown: GracefulShutdown, graceMs: number, logger: Logger): void {
  const onSignal = (signal: ShutdownSignal) => {
    for (const s of SHUTDOWN_SIGNALS) process.removeListener(s, onSignal);
    logger.info({ signal }, 'shutting down: aborting running jobs');
    void shutdown.drain(graceMs).then((stillRunning) => {
      if (stillRunning > 0) {
        logger.warn(
          { stillRunning },
          'jobs still running at shutdown; their claims lapse with the lease',
        );
      }
      restoreFrameworkSignalListeners();
      process.kill(process.pid, signal);
    });
  };
  for (const s of SHUTDOWN_SIGNALS) process.on(s, onSignal);
}
