/** Graceful shutdown (docs/how-it-works.md, "Graceful shutdown"; docs/maintenance.md). */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { loggableError } from '../core/errors.ts';
import {
  restoreFrameworkSignalListeners,
  SHUTDOWN_SIGNALS,
} from './framework-workarounds.ts';

/** Tracks the requests in flight and aborts their jobs when the instance shuts down. */
export class GracefulShutdown {
  readonly #controller = new AbortController();
  readonly #inflight = new Set<Promise<unknown>>();
  /** The run id of each delivery running on this instance (a run's twice if two deliveries run it). */
  readonly #runs: string[] = [];
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
  /** Notes a delivery of `runId` running here (for shutdown's logs); returns its end, called once. */
  running(runId: string): () => void {
    this.#runs.push(runId);
    return () => void this.#runs.splice(this.#runs.indexOf(runId), 1);
  }
  /** The run ids running on this instance now. */
  get runIds(): string[] {
    return [...new Set(this.#runs)];
  }
  /** Aborts every job's signal, waits up to `graceMs` ms; returns how many requests still run. */
  async drain(graceMs: number): Promise<number> {
    this.#controller.abort();
    const graceOver = new AbortController();
    const grace = sleep(graceMs, undefined, { signal: graceOver.signal }).catch(
      () => {},
    );
    await Promise.race([Promise.allSettled([...this.#inflight]), grace]);
    graceOver.abort();
    return this.#inflight.size;
  }
}

/**
 * Drains `shutdown` (at most `graceMs` ms) on SIGTERM or SIGINT, then raises the signal again for
 * functions-framework's listeners, re-installed (with none, its default action ends the process);
 * on an uncaught exception drains too, then exits 16, functions-framework's own code for a crash
 * (meanwhile new deliveries answer 500 `unavailable`).
 */
export function drainOnShutdown(
  shutdown: GracefulShutdown,
  graceMs: number,
  logger: Logger,
): void {
  const onSignal = (signal: NodeJS.Signals) => {
    for (const s of SHUTDOWN_SIGNALS) {
      process.removeListener(s, onSignal);
    }
    logger.info(
      { signal, runIds: shutdown.runIds },
      'shutting down: aborting running jobs',
    );
    void shutdown.drain(graceMs).then((stillRunning) => {
      const message =
        'jobs still running at shutdown; their claims lapse with the lease';
      if (stillRunning > 0) {
        logger.warn({ stillRunning }, message);
      }
      restoreFrameworkSignalListeners();
      process.kill(process.pid, signal);
    });
  };
  for (const s of SHUTDOWN_SIGNALS) {
    process.on(s, onSignal);
  }
  let crashing = false;
  process.on('uncaughtException', (err) => {
    if (crashing) {
      logger.error(
        { err: loggableError(err) },
        'another uncaught exception while draining',
      );
      return;
    }
    crashing = true;
    const runIds = shutdown.runIds;
    const message = `uncaught exception outside any request: the instance ends; aborting its ${runIds.length} running run(s) and releasing their claims so a retry can run them at once`;
    logger.error({ err: loggableError(err), runIds }, message);
    void shutdown.drain(graceMs).then((stillRunning) => {
      const lapsing =
        'runs still running after the drain: their claims lapse with the lease (LEASE_SECONDS)';
      if (stillRunning > 0) {
        logger.error({ runIds: shutdown.runIds, stillRunning }, lapsing);
      }
      process.exit(16);
    });
  });
}
