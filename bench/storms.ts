/**
 * Storms at the ledger: N concurrent `runOnce` calls for one new run, with a job that only counts
 * its executions. They run in a worker thread on their own Firestore client (through the counting
 * proxy), so a storm that outlives its deadline can be stopped: the worker is terminated, its
 * connections close, and the callers still waiting count as errors ("no answer").
 */
import { randomUUID } from 'node:crypto';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { pino } from 'pino';
import { runOnce } from '../build/run-once.js';
import { asRunLedger } from './baselines.ts';
import {
  details,
  firestoreAt,
  processRun,
  type StormLedgerKey,
  stormLedgers,
} from './ledger-figures.ts';
import { histogram } from './report.ts';
import type { WireCounter, WireCounts } from './wire-counter.ts';

/** One storm: `size` concurrent deliveries of one run. */
export interface Storm {
  readonly size: number;
  /** How often the work ran: must be 1. */
  readonly executions: number;
  /** Deliveries answered `unavailable` or `failed`, that threw, or had no answer by the deadline. */
  readonly errors: number;
  readonly outcomes: Record<string, number>;
  /** From the first call until every caller had its answer (or the deadline), ms. */
  readonly allAnsweredMs: number;
  /** Until half the callers had theirs, ms. */
  readonly medianAnsweredMs: number;
  /** Firestore calls the whole storm made, counted at the proxy. */
  readonly roundTrips: number;
  readonly roundTripsByMethod: WireCounts;
}

type Order = { impl: StormLedgerKey; size: number };
type Message =
  | { type: 'ready' }
  | { type: 'executed' }
  | { type: 'answer'; outcome: string; at: number }
  | { type: 'done' };

/** Runs storms, one at a time, each bounded by `deadlineMs`. */
export class StormRunner {
  readonly #host: string;
  readonly #counter: WireCounter;
  readonly #deadlineMs: number;
  #worker: Promise<Worker> | undefined;

  /**
   * @param counter - the proxy the worker's client goes through; it counts each storm's calls.
   * @param deadlineMs - longest a storm may run before its worker is stopped.
   */
  constructor(counter: WireCounter, deadlineMs: number) {
    this.#host = counter.host;
    this.#counter = counter;
    this.#deadlineMs = deadlineMs;
  }

  /** A worker with a warm Firestore channel. */
  #ready(): Promise<Worker> {
    this.#worker ??= new Promise((resolve, reject) => {
      const worker = new Worker(new URL(import.meta.url), {
        workerData: { stormHost: this.#host },
      });
      worker.once('error', reject);
      worker.once('message', () => resolve(worker));
    });
    return this.#worker;
  }

  /** Fires one storm of `size` deliveries at `impl`. */
  async storm(impl: StormLedgerKey, size: number): Promise<Storm> {
    const worker = await this.#ready();
    await this.#counter.reset();
    let executions = 0;
    const answers: { outcome: string; at: number }[] = [];
    let timer: NodeJS.Timeout | undefined;
    const finished = await new Promise<boolean>((resolve) => {
      const onMessage = (m: Message) => {
        if (m.type === 'executed') executions++;
        if (m.type === 'answer') answers.push({ outcome: m.outcome, at: m.at });
        if (m.type === 'done') {
          worker.off('message', onMessage);
          resolve(true);
        }
      };
      worker.on('message', onMessage);
      timer = setTimeout(() => {
        worker.off('message', onMessage);
        resolve(false);
      }, this.#deadlineMs);
      worker.postMessage({ impl, size } satisfies Order);
    });
    clearTimeout(timer);
    if (!finished) {
      await worker.terminate();
      this.#worker = undefined;
    }
    const wire = await this.#counter.counts();
    const missing = size - answers.length;
    const outcomes = histogram([
      ...answers.map((a) => a.outcome),
      ...Array.from({ length: missing }, () => `no answer in ${this.#deadlineMs / 1000} s`),
    ]);
    const times = answers.map((a) => a.at).sort((a, b) => a - b);
    const at = (i: number) => (i < times.length ? (times[i] as number) : this.#deadlineMs);
    return {
      size,
      executions,
      errors:
        (outcomes.unavailable ?? 0) + (outcomes.failed ?? 0) + (outcomes.threw ?? 0) + missing,
      outcomes,
      allAnsweredMs: Math.round(at(size - 1)),
      medianAnsweredMs: Math.round(at(Math.floor(size / 2))),
      roundTrips: wire.total,
      roundTripsByMethod: wire.byMethod,
    };
  }

  /** Stops the worker. */
  async close(): Promise<void> {
    const worker = this.#worker;
    this.#worker = undefined;
    if (worker !== undefined) await (await worker).terminate();
  }
}

/** The worker: one client, one set of ledgers, one storm per order. */
async function serveStorms(host: string): Promise<void> {
  const port = parentPort;
  if (port === null) return;
  const post = (m: Message) => port.postMessage(m);
  const db = firestoreAt(host);
  const ledgers = stormLedgers(db);
  await processRun(ledgers.ledger, `warmup-${randomUUID()}`); // opens the channel
  const logger = pino({ level: 'silent' });
  port.on('message', async ({ impl, size }: Order) => {
    const runId = `storm-${size}-${randomUUID()}`;
    const work = () => post({ type: 'executed' });
    const started = performance.now();
    await Promise.all(
      Array.from({ length: size }, () =>
        runOnce(asRunLedger(ledgers[impl]), runId, work, { logger, details: details(runId) }).then(
          (r) => post({ type: 'answer', outcome: r.outcome, at: performance.now() - started }),
          () => post({ type: 'answer', outcome: 'threw', at: performance.now() - started }),
        ),
      ),
    );
    post({ type: 'done' });
  });
  post({ type: 'ready' });
}

if (!isMainThread && typeof workerData?.stormHost === 'string') {
  await serveStorms(workerData.stormHost);
}
