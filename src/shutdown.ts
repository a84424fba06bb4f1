/**
 * Graceful shutdown. Cloud Run sends SIGTERM and, 10 s later, SIGKILL. On SIGTERM the running jobs'
 * signals abort (reason `shutdown`); a job that stops and throws has its claim released (fenced), so
 * the next delivery runs at once on another instance instead of waiting out the lease.
 */
import type { Logger } from 'pino';

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

const SIGNALS = ['SIGTERM', 'SIGINT'] as const;
type ShutdownSignal = (typeof SIGNALS)[number];
type Listener = (...args: unknown[]) => void;

/**
 * Drains `shutdown` on SIGTERM or SIGINT, then lets the process end as it would have.
 *
 * functions-framework registers its own SIGTERM/SIGINT listeners when its server starts, and they
 * exit the process at once (its `ErrorHandler.register`). So the listeners added after this call
 * are set aside and re-installed after draining, and the signal is raised again for them; with none,
 * the signal's default action ends the process.
 *
 * @param graceMs - the longest drain, ms.
 */
export function drainOnSignals(shutdown: GracefulShutdown, graceMs: number, logger: Logger): void {
  const setAside: [ShutdownSignal, Listener][] = [];
  const onNewListener = (event: string | symbol, listener: Listener) => {
    const signal = SIGNALS.find((s) => s === event);
    if (signal === undefined || listener === onSignal) return;
    // 'newListener' fires before the listener is added: take it off once it is.
    queueMicrotask(() => {
      process.removeListener(signal, listener);
      setAside.push([signal, listener]);
    });
  };
  const onSignal = (signal: ShutdownSignal) => {
    process.removeListener('newListener', onNewListener);
    for (const s of SIGNALS) process.removeListener(s, onSignal);
    logger.info({ signal }, 'shutting down: aborting running jobs');
    void shutdown.drain(graceMs).then((stillRunning) => {
      if (stillRunning > 0) {
        logger.warn(
          { stillRunning },
          'jobs still running at shutdown; their claims lapse with the lease',
        );
      }
      for (const [s, listener] of setAside) process.on(s, listener);
      process.kill(process.pid, signal);
    });
  };
  for (const s of SIGNALS) process.on(s, onSignal);
  process.on('newListener', onNewListener);
}
