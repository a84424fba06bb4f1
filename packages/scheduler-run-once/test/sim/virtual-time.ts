/**
 * Driven virtual time for the simulator: while installed, `setTimeout`, `setInterval`, their
 * clears, `Date.now()` and `performance.now()` run on a virtual clock that only {@link
 * VirtualTime.run} advances, so a history of hours takes milliseconds and replays exactly. Each
 * simulated instance runs in its own context (`AsyncLocalStorage`), which gives it its own wall
 * clock (an offset, stepped at will), lets a pause hold its timers, and a crash drop them.
 * Never waits for the wall clock.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

/** One simulated machine's clock: what its `Date.now()` adds to the true time, and its state. */
export interface MachineClock {
  readonly name: string;
  /** Its wall clock minus the true time, ms (a step changes it). */
  offsetMs: number;
  /** True time until which its timers are held (a paused process), ms. */
  pausedUntil: number;
  /** A crashed machine's timers never fire. */
  dead: boolean;
}

interface Timer {
  readonly id: number;
  at: number;
  readonly seq: number;
  readonly fn: () => void;
  /** Runs a callback in the async context the timer was set in (every AsyncLocalStorage's). */
  readonly context: <R>(fn: () => R) => R;
  readonly intervalMs: number | undefined;
  readonly machine: MachineClock | undefined;
}

/** The fake `Timeout` the patched timers return: enough of Node's for the product's calls. */
class FakeTimeout {
  readonly id: number;
  constructor(id: number) {
    this.id = id;
  }
  unref(): this {
    return this;
  }
  ref(): this {
    return this;
  }
  hasRef(): boolean {
    return false;
  }
  [Symbol.toPrimitive](): number {
    return this.id;
  }
}

const realTimers = {
  setTimeout: globalThis.setTimeout,
  clearTimeout: globalThis.clearTimeout,
  setInterval: globalThis.setInterval,
  clearInterval: globalThis.clearInterval,
  setImmediate: globalThis.setImmediate,
  dateNow: Date.now,
  performanceNow: performance.now.bind(performance),
};

/** The true time's start: four minutes before an hour, so a history crosses the hour and its first
 * slot runs the missed-run check of the slots closed before it. */
export const EPOCH_MS = Date.UTC(2026, 0, 5, 0, 56, 0);

/**
 * The virtual clock and its timer queue. One is installed at a time.
 *
 * @example
 * const time = new VirtualTime();
 * time.install();
 * try { setTimeout(() => {}, 1000); await time.run(5000); } finally { time.uninstall(); }
 */
export class VirtualTime {
  /** True time now, ms since the epoch. */
  now: number;
  /** Real I/O in flight (the emulator's calls): virtual time stands still until it answers. */
  #inFlight = 0;
  /** Marks code that runs on real time: a real client's own timers and clock. */
  readonly #real = new AsyncLocalStorage<boolean>();

  constructor(startMs = EPOCH_MS) {
    this.now = startMs;
  }

  /**
   * Runs real I/O (`call`, e.g. a real Firestore client's request) on real timers and the real
   * clock; virtual time does not move until it settles.
   */
  real<T>(call: () => Promise<T>): Promise<T> {
    this.#inFlight++;
    const done = () => {
      this.#inFlight--;
    };
    const promise = this.#real.run(true, call);
    promise.then(done, done);
    return promise;
  }
  /** Errors thrown by timer callbacks (an uncaught exception in a real process). */
  readonly errors: unknown[] = [];
  readonly #timers = new Map<number, Timer>();
  #nextId = 1;
  #seq = 0;
  readonly #context = new AsyncLocalStorage<MachineClock>();

  /** The machine whose code is running, if any. */
  get current(): MachineClock | undefined {
    return this.#context.getStore();
  }

  /** Runs `fn` as code of `machine`: its timers and clock are that machine's. */
  within<T>(machine: MachineClock | undefined, fn: () => T): T {
    return machine === undefined
      ? this.#context.exit(fn)
      : this.#context.run(machine, fn);
  }

  /** Schedules `fn` at `ms` from now on the current machine (or none). */
  schedule(fn: () => void, ms: number, intervalMs?: number): FakeTimeout {
    const id = this.#nextId++;
    const delay = Number.isFinite(ms) && ms > 0 ? ms : 0;
    this.#timers.set(id, {
      id,
      at: this.now + delay,
      seq: this.#seq++,
      fn,
      context: AsyncLocalStorage.snapshot(),
      intervalMs,
      machine: this.current,
    });
    return new FakeTimeout(id);
  }

  cancel(handle: unknown): void {
    const id =
      handle instanceof FakeTimeout
        ? handle.id
        : typeof handle === 'number'
          ? handle
          : undefined;
    if (id !== undefined) {
      this.#timers.delete(id);
    }
  }

  /** A promise resolved `ms` later on the virtual clock. */
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.schedule(resolve, ms));
  }

  install(): void {
    globalThis.setTimeout = ((
      fn: (...a: unknown[]) => void,
      ms?: number,
      ...args: unknown[]
    ) =>
      this.schedule(
        () => fn(...args),
        ms ?? 0,
      )) as unknown as typeof setTimeout;
    globalThis.setInterval = ((
      fn: (...a: unknown[]) => void,
      ms?: number,
      ...args: unknown[]
    ) =>
      this.schedule(
        () => fn(...args),
        ms ?? 0,
        Math.max(1, ms ?? 1),
      )) as unknown as typeof setInterval;
    globalThis.clearTimeout = ((h: unknown) =>
      this.cancel(h)) as typeof clearTimeout;
    globalThis.clearInterval = ((h: unknown) =>
      this.cancel(h)) as typeof clearInterval;
    Date.now = () => Math.floor(this.now + (this.current?.offsetMs ?? 0));
    performance.now = () => this.now - EPOCH_MS + 1_000_000;
  }

  uninstall(): void {
    globalThis.setTimeout = realTimers.setTimeout;
    globalThis.clearTimeout = realTimers.clearTimeout;
    globalThis.setInterval = realTimers.setInterval;
    globalThis.clearInterval = realTimers.clearInterval;
    Date.now = realTimers.dateNow;
    performance.now = realTimers.performanceNow;
  }

  /** Lets every pending promise reaction run (a real turn of the event loop; no time passes). */
  async settle(): Promise<void> {
    const turn = () =>
      new Promise((resolve) => realTimers.setImmediate(resolve));
    for (;;) {
      await turn();
      if (this.#inFlight > 0) {
        await new Promise((resolve) => realTimers.setTimeout(resolve, 1));
        continue;
      }
      // Quiet for a whole turn: what an answer's continuations started has started.
      await turn();
      if (this.#inFlight === 0) {
        return;
      }
    }
  }

  /**
   * Fires timers in time order (ties in the order they were set) until none is due before `until`,
   * settling promises after each; then the clock stands at `until`.
   *
   * @throws if more than `maxSteps` timers fire (a livelock in the code under test).
   */
  async run(until: number, maxSteps = 200_000): Promise<void> {
    for (let steps = 0; ; steps++) {
      await this.settle();
      const next = this.#next();
      if (next === undefined || next.at > until) {
        break;
      }
      if (steps > maxSteps) {
        throw new Error(`virtual time: more than ${maxSteps} timers fired`);
      }
      this.#timers.delete(next.id);
      const machine = next.machine;
      if (machine?.dead) {
        continue;
      }
      if (machine !== undefined && machine.pausedUntil > next.at) {
        // A paused process runs nothing: the timer fires when it resumes.
        this.#timers.set(next.id, { ...next, at: machine.pausedUntil });
        continue;
      }
      this.now = Math.max(this.now, next.at);
      if (next.intervalMs !== undefined) {
        this.#timers.set(next.id, {
          ...next,
          at: this.now + next.intervalMs,
          seq: this.#seq++,
        });
      }
      try {
        next.context(next.fn);
      } catch (err) {
        this.errors.push(err);
      }
    }
    this.now = Math.max(this.now, until);
    await this.settle();
  }

  /** Runs until no timer is left that fires before `limit` (everything has drained). */
  async drain(limit: number): Promise<void> {
    await this.run(limit);
  }

  #next(): Timer | undefined {
    let best: Timer | undefined;
    for (const t of this.#timers.values()) {
      if (
        best === undefined ||
        t.at < best.at ||
        (t.at === best.at && t.seq < best.seq)
      ) {
        best = t;
      }
    }
    return best;
  }

  /** Timers pending (for a test's assertions). */
  get pending(): number {
    return this.#timers.size;
  }
}
