/**
 * Figures at the ledger, in this process: latency of a processed run and of a duplicate for the
 * project's `RunLedger` and the baselines, the Firestore calls each makes, and storms of duplicates.
 */
import { randomUUID } from 'node:crypto';
import { Firestore } from '@google-cloud/firestore';
import { pino } from 'pino';
import { type Ledger, RunLedger } from '../src/core/ledger.ts';
import { runOnce } from '../src/core/run-once.ts';
import type { RunDetails } from '../src/core/run-record.ts';
import { freshCollection as sharedFreshCollection } from '../src/dev/local-processes.ts';
import { FloorLedger, LiteralPortLedger } from './baselines.ts';
import {
  fire,
  type Storm,
  type Summary,
  stormFigures,
  summarise,
} from './figures.ts';
import type { WireCounter } from './wire-counter.ts';

/** The ledgers compared, by key. */
export const LEDGERS = {
  project: "project's RunLedger",
  literal: '(a) literal port',
  floor: '(b) floor',
} as const;
export type LedgerKey = keyof typeof LEDGERS;

/** The in-process storms: at one `RunLedger`, spread over 10 instances (10 Cloud Run instances), and at (a). */
export const STORM_LEDGERS = {
  project: LEDGERS.project,
  spread: `${LEDGERS.project} x 10 instances`,
  literal: LEDGERS.literal,
} as const;

/** Lease and retention as deployed by default (300 s, 1 day); 10 s per Firestore call. */
const SETTINGS = {
  leaseMs: 300_000,
  retentionMs: 86_400_000,
  timeoutMs: 10_000,
};

/** A Firestore client of the emulator, or of the counting proxy, at `host`. */
export function firestoreAt(host: string): Firestore {
  // The client reads the emulator's address from FIRESTORE_EMULATOR_HOST, over any setting.
  const previous = process.env.FIRESTORE_EMULATOR_HOST;
  process.env.FIRESTORE_EMULATOR_HOST = host;
  try {
    return new Firestore({ projectId: process.env.GOOGLE_CLOUD_PROJECT });
  } finally {
    process.env.FIRESTORE_EMULATOR_HOST = previous;
  }
}

/** A collection no earlier run used: `bench_<what>_<random>`. */
export function freshCollection(what: string): string {
  return sharedFreshCollection(`bench_${what}`);
}

function ledger(key: LedgerKey, db: Firestore, collection: string): Ledger {
  const options = { collection, ...SETTINGS };
  if (key === 'project') {
    return RunLedger.open(db, options);
  }
  return key === 'literal'
    ? new LiteralPortLedger(db, options)
    : new FloorLedger(db, options);
}

function details(_runId: string): RunDetails {
  return { jobName: 'bench', scheduleTime: new Date().toISOString() };
}

async function processRun(ledger: Ledger, runId: string): Promise<void> {
  const claimed = await ledger.claim(runId, details(runId));
  if (claimed.state !== 'claimed') {
    throw new Error(`${runId} was not claimed: ${claimed.state}`);
  }
  if ((await ledger.complete(claimed.claim)) !== 'recorded') {
    throw new Error(`${runId}: lease lost`);
  }
}

async function duplicateOf(ledger: Ledger, runId: string): Promise<void> {
  const claimed = await ledger.claim(runId, details(runId));
  if (claimed.state === 'claimed') {
    throw new Error(`a duplicate of ${runId} was claimed`);
  }
}

/** One ledger's figures: times in ms, calls counted on the wire. */
export interface LedgerFigures {
  /** claim + complete of a new run. */
  readonly perRun: Summary;
  /** claim of a run already completed. */
  readonly perDuplicate: Summary;
  readonly callsPerRun: number;
  readonly callsPerDuplicate: number;
}

/**
 * Times `runs` new runs and a duplicate of each per ledger on `db`, interleaved with the order
 * rotating so all see the same emulator; then counts the calls of `counted` more through
 * `viaCounter`, a client of `counter`'s proxy.
 */
export async function measureLedgers(
  db: Firestore,
  viaCounter: Firestore,
  counter: WireCounter,
  plan: { runs: number; warmup: number; counted: number },
): Promise<Record<LedgerKey, LedgerFigures>> {
  const keys = Object.keys(LEDGERS) as LedgerKey[];
  const timed = freshCollection('latency');
  const samples = keys.map((key) => ({
    ledger: ledger(key, db, timed),
    run: [] as number[],
    dup: [] as number[],
  }));
  for (let i = -plan.warmup; i < plan.runs; i++) {
    for (let k = 0; k < keys.length; k++) {
      const s = samples[
        (i + plan.warmup + k) % keys.length
      ] as (typeof samples)[number];
      const started = performance.now();
      await processRun(s.ledger, `${i}-${k}`);
      const processed = performance.now();
      await duplicateOf(s.ledger, `${i}-${k}`);
      if (i < 0) {
        continue; // warm-up
      }
      s.run.push(processed - started);
      s.dup.push(performance.now() - processed);
    }
  }
  const counted = freshCollection('calls');
  await processRun(ledger('project', viaCounter, counted), 'warmup'); // opens the channel
  const callsOf = async (work: (i: number) => Promise<void>) => {
    counter.reset();
    for (let i = 0; i < plan.counted; i++) {
      await work(i);
    }
    return counter.calls() / plan.counted;
  };
  const figures = {} as Record<LedgerKey, LedgerFigures>;
  for (const [k, key] of keys.entries()) {
    const target = ledger(key, viaCounter, counted);
    const { run, dup } = samples[k] as (typeof samples)[number];
    figures[key] = {
      perRun: summarise(run),
      perDuplicate: summarise(dup),
      callsPerRun: await callsOf((i) => processRun(target, `${key}-${i}`)),
      callsPerDuplicate: await callsOf((i) =>
        duplicateOf(target, `${key}-${i}`),
      ),
    };
  }
  return figures;
}

/**
 * Fires `size` concurrent `runOnce` calls for one new run, through `viaCounter` (a client of
 * `counter`'s proxy), with a job that only counts its executions.
 */
export async function stormInProcess(
  key: keyof typeof STORM_LEDGERS,
  size: number,
  viaCounter: Firestore,
  counter: WireCounter,
): Promise<Storm> {
  const collection = freshCollection('storm');
  const instances = Array.from({ length: key === 'spread' ? 10 : 1 }, () =>
    ledger(key === 'literal' ? 'literal' : 'project', viaCounter, collection),
  );
  const runId = randomUUID();
  const options = {
    logger: pino({ level: 'silent' }),
    details: details(runId),
  };
  let executions = 0;
  const job = () => {
    executions++;
  };
  counter.reset();
  const answers = await fire(size, async (i) => {
    const ledger = instances[i % instances.length] as Ledger;
    const { outcome } = await runOnce(ledger, runId, job, options);
    return {
      answer: outcome,
      error: outcome === 'unavailable' || outcome === 'failed',
    };
  });
  const storm = {
    where: 'in process',
    ledger: STORM_LEDGERS[key],
    executions,
  } as const;
  return stormFigures({ ...storm, calls: counter.calls() }, answers);
}
