/**
 * In-process figures for the project's `RunLedger` and the two baselines: latency per run and per
 * duplicate, Firestore round trips counted at the proxy, the ledgers the storms use, and what a
 * storm's calls cost the emulator on their own.
 */
import { randomUUID } from 'node:crypto';
import { Firestore, Timestamp } from '@google-cloud/firestore';
import { RunLedger } from '../build/ledger.js';
import { FloorLedger, type LedgerLike, LiteralPortLedger } from './baselines.ts';
import { SingleFlightLedger } from './proposals.ts';
import { type Summary, summarise } from './report.ts';
import type { WireCounter, WireCounts } from './wire-counter.ts';

/** The three ledgers compared, by key. */
export const IMPLEMENTATIONS = {
  ledger: "project's RunLedger",
  literal: '(a) literal port',
  floor: '(b) floor',
} as const;
export type ImplementationKey = keyof typeof IMPLEMENTATIONS;

/** Leases and retention as deployed by default (300 s, 1 day); per-call timeout 10 s. */
const LEDGER_SETTINGS = { leaseMs: 300_000, retentionMs: 86_400_000, timeoutMs: 10_000 };

/** A Firestore client on `host` (the emulator, or the counting proxy in front of it). */
export function firestoreAt(host: string): Firestore {
  // The client takes the emulator's address from FIRESTORE_EMULATOR_HOST at construction, over any
  // setting, so point the variable at `host` for the constructor only.
  const previous = process.env.FIRESTORE_EMULATOR_HOST;
  process.env.FIRESTORE_EMULATOR_HOST = host;
  try {
    return new Firestore({
      projectId: process.env.GOOGLE_CLOUD_PROJECT ?? 'demo-scheduler-run-once',
      ignoreUndefinedProperties: true,
    });
  } finally {
    process.env.FIRESTORE_EMULATOR_HOST = previous;
  }
}

/** A collection no earlier run used. */
export function freshCollection(prefix: string): string {
  return `bench_${prefix}_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
}

function ledgers(db: Firestore, collection: string): Record<ImplementationKey, LedgerLike> {
  const options = { collection, ...LEDGER_SETTINGS };
  return {
    ledger: new RunLedger(db, options),
    literal: new LiteralPortLedger(db, options),
    floor: new FloorLedger(db, options),
  };
}

/** Descriptive fields stored with each claim, like the HTTP handler's. */
export function details(runId: string) {
  return { job_name: 'bench', schedule_time: Timestamp.fromMillis(Date.now()), run: runId };
}

/** Claims and completes a new run; throws unless both land. */
export async function processRun(ledger: LedgerLike, runId: string): Promise<void> {
  const claimed = await ledger.claim(runId, details(runId));
  if (claimed.state !== 'claimed') {
    throw new Error(`run ${runId} was not claimed: ${claimed.state}`);
  }
  const completion = await ledger.complete(claimed.claim);
  if (completion !== 'recorded') throw new Error(`run ${runId} completion: ${completion}`);
}

async function duplicateOf(ledger: LedgerLike, runId: string): Promise<void> {
  const claimed = await ledger.claim(runId, details(runId));
  if (claimed.state === 'claimed') throw new Error(`duplicate of ${runId} was claimed again`);
}

/** Latency of one implementation. */
export interface Latency {
  /** claim + complete of a new run, ms. */
  readonly perRun: Summary;
  /** claim of a run already completed, ms. */
  readonly perDuplicate: Summary;
}

/**
 * Times claim + complete of `runs` new runs and one duplicate claim of each, for every
 * implementation, interleaved (the order rotates each round) so all three see the same emulator.
 */
export async function measureLatency(
  db: Firestore,
  runs: number,
  warmup: number,
): Promise<Record<ImplementationKey, Latency>> {
  const impls = ledgers(db, freshCollection('latency'));
  const keys = Object.keys(impls) as ImplementationKey[];
  for (const key of keys) {
    for (let i = 0; i < warmup; i++) {
      await processRun(impls[key], `warmup-${key}-${i}`);
      await duplicateOf(impls[key], `warmup-${key}-${i}`);
    }
  }
  const perRun = Object.fromEntries(keys.map((k) => [k, [] as number[]]));
  const perDuplicate = Object.fromEntries(keys.map((k) => [k, [] as number[]]));
  for (let i = 0; i < runs; i++) {
    for (let k = 0; k < keys.length; k++) {
      const key = keys[(i + k) % keys.length] as ImplementationKey;
      const runId = `${key}-${i}`;
      let started = performance.now();
      await processRun(impls[key], runId);
      perRun[key]?.push(performance.now() - started);
      started = performance.now();
      await duplicateOf(impls[key], runId);
      perDuplicate[key]?.push(performance.now() - started);
    }
  }
  return Object.fromEntries(
    keys.map((k) => [
      k,
      { perRun: summarise(perRun[k] ?? []), perDuplicate: summarise(perDuplicate[k] ?? []) },
    ]),
  ) as Record<ImplementationKey, Latency>;
}

/** Round trips counted on the wire. */
export interface RoundTrips {
  readonly perRun: number;
  readonly perDuplicate: number;
  readonly perRunByMethod: WireCounts;
  readonly perDuplicateByMethod: WireCounts;
}

function perCall(counts: WireCounts, calls: number): WireCounts {
  return Object.fromEntries(Object.entries(counts).map(([k, v]) => [k, v / calls]));
}

/**
 * Counts the calls `runs` new runs and `runs` duplicates make, per implementation, at the proxy.
 *
 * @param db - a client whose emulator host is the proxy's.
 */
export async function countRoundTrips(
  db: Firestore,
  counter: WireCounter,
  runs: number,
): Promise<Record<ImplementationKey, RoundTrips>> {
  const impls = ledgers(db, freshCollection('roundtrips'));
  const result: Partial<Record<ImplementationKey, RoundTrips>> = {};
  await processRun(impls.ledger, 'warmup'); // opens the channel, outside the counts
  for (const key of Object.keys(impls) as ImplementationKey[]) {
    await counter.reset();
    for (let i = 0; i < runs; i++) await processRun(impls[key], `${key}-${i}`);
    const processed = await counter.counts();
    await counter.reset();
    for (let i = 0; i < runs; i++) await duplicateOf(impls[key], `${key}-${i}`);
    const duplicates = await counter.counts();
    result[key] = {
      perRun: processed.total / runs,
      perDuplicate: duplicates.total / runs,
      perRunByMethod: perCall(processed.byMethod, runs),
      perDuplicateByMethod: perCall(duplicates.byMethod, runs),
    };
  }
  return result as Record<ImplementationKey, RoundTrips>;
}

/**
 * What the storms compare: the project's ledger, the proposed single flight and baseline (a), in
 * that order, so (a)'s slow storms come last in each size.
 */
export const STORM_LEDGERS = {
  ledger: IMPLEMENTATIONS.ledger,
  proposed: 'proposed: RunLedger + single flight',
  literal: IMPLEMENTATIONS.literal,
} as const;
export type StormLedgerKey = keyof typeof STORM_LEDGERS;

/** The ledgers of {@link STORM_LEDGERS} on `db`, on one fresh collection. */
export function stormLedgers(db: Firestore): Record<StormLedgerKey, LedgerLike> {
  const { ledger, literal } = ledgers(db, freshCollection('storm'));
  return { ledger, literal, proposed: new SingleFlightLedger(ledger) };
}

/** ms until all of `size` concurrent calls were answered, per kind of call. */
export interface Contention {
  /** `create()` of one document: one lands, the rest fail ALREADY_EXISTS (a storm's claims). */
  readonly createOneDocument: number;
  /** `get()` of one document (a storm's reads after losing the create). */
  readonly getOneDocument: number;
  /** `create()` of as many different documents (the same load without the conflict). */
  readonly createDistinctDocuments: number;
}

/**
 * Times the Firestore calls a storm is made of, `size` at a time, on their own: what the emulator
 * takes to answer conflicting writes to one document, against reads and unconflicted writes.
 */
export async function measureContention(db: Firestore, size: number): Promise<Contention> {
  const collection = db.collection(freshCollection('contention'));
  await collection.doc('warmup').create({ status: 'in_progress' });
  const time = async (call: (i: number) => Promise<unknown>) => {
    const started = performance.now();
    await Promise.all(Array.from({ length: size }, (_, i) => call(i).catch(() => undefined)));
    return Math.round(performance.now() - started);
  };
  return {
    createOneDocument: await time(() => collection.doc('one').create({ status: 'in_progress' })),
    getOneDocument: await time(() => collection.doc('one').get()),
    createDistinctDocuments: await time((i) =>
      collection.doc(`distinct-${i}`).create({ status: 'in_progress' }),
    ),
  };
}
