/**
 * The bench's results: their shape (also the JSON written to `bench/results.json`), the targets
 * of issue 5 judged against them, and the printed tables.
 */
import type { ColdBreakdown, ColdStart, HttpStorm, Throughput } from './http-figures.ts';
import {
  type Contention,
  IMPLEMENTATIONS,
  type ImplementationKey,
  type Latency,
  type RoundTrips,
  STORM_LEDGERS,
  type StormLedgerKey,
} from './ledger-figures.ts';
import { describeCounts, ms, round, table, times } from './report.ts';
import type { Storm } from './storms.ts';

/** Everything one bench run measured. */
export interface BenchResults {
  readonly mode: 'full' | 'smoke';
  readonly startedAt: string;
  readonly wallSeconds: number;
  readonly machine: Record<string, unknown>;
  readonly plan: Record<string, unknown>;
  readonly ledger: {
    readonly latency: Record<ImplementationKey, Latency>;
    readonly ratios: Ratios;
    readonly roundTrips: Record<ImplementationKey, RoundTrips>;
  };
  readonly storms: {
    readonly inProcess: readonly (Storm & { readonly impl: StormLedgerKey })[];
    readonly http: readonly (HttpStorm & { readonly impl: StormLedgerKey })[];
    /** The calls a storm is made of, timed on their own at the largest storm size. */
    readonly contention?: Contention;
  };
  readonly throughput: readonly {
    readonly fn: 'project' | 'hello';
    readonly result: Throughput;
  }[];
  /** Runs the throughput collection holds afterwards, against the 2xx answers it got. */
  readonly throughputCheck?: { readonly answered2xx: number; readonly recordedRuns: number };
  readonly coldStarts: readonly ColdStart[];
  readonly coldBreakdown?: ColdBreakdown;
  readonly targets: readonly Target[];
}

/** The baselines over the project's ledger, from the same interleaved run. */
export interface Ratios {
  readonly literalOverLedger: { medianPerRun: number; p95PerRun: number; medianPerDup: number };
  readonly floorOverLedger: { medianPerRun: number; p95PerRun: number; medianPerDup: number };
}

/** One target of the issue and whether this run met it. */
export interface Target {
  readonly target: string;
  readonly measured: string;
  readonly met: 'yes' | 'no' | 'within limit' | 'not measured';
}

/** Ratios of each baseline's latency over the project's ledger's. */
export function ratios(latency: Record<ImplementationKey, Latency>): Ratios {
  const over = (key: ImplementationKey) => ({
    medianPerRun: round(latency[key].perRun.median / latency.ledger.perRun.median),
    p95PerRun: round(latency[key].perRun.p95 / latency.ledger.perRun.p95),
    medianPerDup: round(latency[key].perDuplicate.median / latency.ledger.perDuplicate.median),
  });
  return { literalOverLedger: over('literal'), floorOverLedger: over('floor') };
}

/** Judges the issue's targets (ratios, on the emulator, this machine). */
export function evaluateTargets(r: Omit<BenchResults, 'targets'>): Target[] {
  const rt = r.ledger.roundTrips.ledger;
  const speedup = r.ledger.ratios.literalOverLedger.medianPerRun;
  const storm200 = (list: readonly { impl: string; size: number }[], impl: StormLedgerKey) =>
    list.find((s) => s.impl === impl && s.size === 200) as
      | { allAnsweredMs: number; errors: number }
      | undefined;
  const atLedger = storm200(r.storms.inProcess, 'ledger');
  const literal = storm200(r.storms.inProcess, 'literal');
  const overHttp = storm200(r.storms.http, 'ledger');
  const cold = (key: string) => r.coldStarts.find((c) => c.key === key)?.first200.median;
  const coldRatio = (cold('project') ?? Number.NaN) / (cold('hello') ?? Number.NaN);
  return [
    {
      target: 'Firestore round trips per processed run <= 2',
      measured: `${rt.perRun}`,
      met: rt.perRun <= 2 ? 'yes' : 'no',
    },
    {
      target: 'round trips per duplicate: 1 (at most 2)',
      measured: `${rt.perDuplicate}`,
      met: rt.perDuplicate <= 1 ? 'yes' : rt.perDuplicate <= 2 ? 'within limit' : 'no',
    },
    {
      target: 'ledger >= 4x faster than (a) per run (median claim + complete)',
      measured: times(speedup),
      met: speedup >= 4 ? 'yes' : 'no',
    },
    {
      target: '200-duplicate storm at the ledger answered in < 1 s with 0 errors',
      measured:
        atLedger === undefined
          ? '–'
          : `${ms(atLedger.allAnsweredMs)}, ${atLedger.errors} errors; (a) ${ms(literal?.allAnsweredMs ?? Number.NaN)}, ${literal?.errors ?? '–'} errors; HTTP ${ms(overHttp?.allAnsweredMs ?? Number.NaN)}`,
      met:
        atLedger === undefined
          ? 'not measured'
          : atLedger.allAnsweredMs < 1000 && atLedger.errors === 0
            ? 'yes'
            : 'no',
    },
    {
      target: 'cold start (spawn to first 200) <= 1.5x hello world',
      measured: times(coldRatio),
      met: Number.isNaN(coldRatio) ? 'not measured' : coldRatio <= 1.5 ? 'yes' : 'no',
    },
  ];
}

function perMethod(counts: Readonly<Record<string, number>>): string {
  return Object.entries(counts)
    .map(([method, n]) => `${round(n, 2)} ${method}`)
    .join(' + ');
}

/** The tables, as printed. */
export function render(r: BenchResults): string {
  const keys = Object.keys(IMPLEMENTATIONS) as ImplementationKey[];
  const { latency, roundTrips } = r.ledger;
  const parts: string[] = [];
  parts.push(
    table(
      `Ledger in process: claim + complete of a new run, then a duplicate claim of it (${latency.ledger.perRun.n} of each per ledger, interleaved; calls counted at a proxy)`,
      [
        'ledger',
        'run median',
        'run p95',
        'vs project',
        'dup median',
        'dup p95',
        'calls/run',
        'calls/dup',
        'ms per call (run)',
        'calls per run; per duplicate',
      ],
      keys.map((k) => [
        IMPLEMENTATIONS[k],
        ms(latency[k].perRun.median),
        ms(latency[k].perRun.p95),
        times(latency[k].perRun.median / latency.ledger.perRun.median),
        ms(latency[k].perDuplicate.median),
        ms(latency[k].perDuplicate.p95),
        `${round(roundTrips[k].perRun)}`,
        `${round(roundTrips[k].perDuplicate)}`,
        ms(latency[k].perRun.median / roundTrips[k].perRun),
        `${perMethod(roundTrips[k].perRunByMethod)}; ${perMethod(roundTrips[k].perDuplicateByMethod)}`,
      ]),
    ),
  );
  const stormRows = (
    where: string,
    list: readonly ((Storm | HttpStorm) & { impl: StormLedgerKey })[],
  ) =>
    list.map((s) => [
      where,
      STORM_LEDGERS[s.impl],
      `${s.size}`,
      `${s.executions}`,
      `${s.errors}`,
      ms(s.allAnsweredMs),
      ms(s.medianAnsweredMs),
      `${s.roundTrips} (${round(s.roundTrips / s.size, 2)}/caller)`,
      'statuses' in s
        ? `${describeCounts(s.statuses)} (${describeCounts(s.outcomes)})`
        : describeCounts(s.outcomes),
    ]);
  parts.push(
    table(
      'Storms: N concurrent deliveries of one new run (in process: runOnce with a no-op job; HTTP: the built function, shipped 1 s job)',
      [
        'where',
        'ledger',
        'N',
        'executions',
        'errors/5xx',
        'all answered',
        'half answered',
        'Firestore calls',
        'answers',
      ],
      [...stormRows('in process', r.storms.inProcess), ...stormRows('HTTP', r.storms.http)],
    ),
  );
  const contention = r.storms.contention;
  if (contention !== undefined) {
    const size = Math.max(...r.storms.inProcess.map((s) => s.size));
    parts.push(
      table(
        `What a storm is made of: ${size} concurrent calls at the emulator, time until all answered`,
        ['calls', 'all answered'],
        [
          [
            `${size} x create() of one document (1 lands, the rest conflict)`,
            ms(contention.createOneDocument),
          ],
          [`${size} x get() of that document`, ms(contention.getOneDocument)],
          [
            `${size} x create() of ${size} different documents`,
            ms(contention.createDistinctDocuments),
          ],
        ],
      ),
    );
  }
  if (r.throughput.length > 0) {
    const hello = (c: number) =>
      r.throughput.find((t) => t.fn === 'hello' && t.result.concurrency === c)?.result;
    const check = r.throughputCheck;
    parts.push(
      table(
        `HTTP throughput: distinct runs per second through one function process (autocannon, 127.0.0.1)${check ? `; Firestore holds ${check.recordedRuns} run records for ${check.answered2xx} 2xx answers (requests in flight when a level ends finish unanswered)` : ''}`,
        ['function', 'concurrency', 'runs/s', 'vs hello', 'p50', 'p99', 'non-2xx', 'errors'],
        r.throughput.map(({ fn, result: t }) => [
          fn === 'project' ? 'project (no-op job, bench/fixtures/noop.ts)' : 'hello world',
          `${t.concurrency}`,
          `${t.runsPerSecond}`,
          times(t.runsPerSecond / (hello(t.concurrency)?.runsPerSecond ?? Number.NaN)),
          ms(t.latencyP50Ms),
          ms(t.latencyP99Ms),
          `${t.non2xx}`,
          `${t.errors}`,
        ]),
      ),
    );
  }
  if (r.coldStarts.length > 0) {
    const hello = r.coldStarts.find((c) => c.key === 'hello');
    parts.push(
      table(
        'Cold start: spawn -> listening -> first 200 on a new run (medians; JavaScript as deployed unless noted)',
        [
          'variant',
          'starts',
          'listening',
          'first request',
          'first 200',
          'first 200 p95',
          'vs hello',
        ],
        r.coldStarts.map((c) => [
          c.label,
          `${c.listen.n}`,
          ms(c.listen.median),
          ms(c.firstRequest.median),
          ms(c.first200.median),
          ms(c.first200.p95),
          times(c.first200.median / (hello?.first200.median ?? Number.NaN)),
        ]),
      ),
    );
  }
  if (r.coldBreakdown !== undefined) {
    const { grpc, rest } = r.coldBreakdown.sequence;
    parts.push(
      table(
        "Where the project's cold start goes: build/index.js's imports in its order, then two Firestore calls (fresh process, medians, ms)",
        ['step', 'gRPC (default)', 'preferRest'],
        Object.keys(grpc).map((step) => [step, `${grpc[step]}`, `${rest[step] ?? '–'}`]),
      ),
    );
    parts.push(
      table(
        'Import cost of each heavy dependency on its own (fresh process each, medians, ms)',
        ['import', 'ms'],
        Object.entries(r.coldBreakdown.alone).map(([label, value]) => [label, `${value}`]),
      ),
    );
  }
  parts.push(
    table(
      `Targets (${r.mode} run, ${r.wallSeconds} s)`,
      ['target', 'measured', 'met'],
      r.targets.map((t) => [t.target, t.measured, t.met]),
    ),
  );
  return parts.join('\n');
}
