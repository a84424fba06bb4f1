/**
 * The bench's results, issue 5's targets judged against them, and the printed tables.
 */
import type { Storm } from './figures.ts';
import type { HistoryFigures } from './history.ts';
import { LEDGERS, type LedgerFigures, type LedgerKey, STORM_LEDGERS } from './in-process.ts';
import type { ColdStart, ColdStartKey, Throughput } from './over-http.ts';

/** Everything one run measured. */
export interface Results {
  readonly ledgers: Record<LedgerKey, LedgerFigures>;
  readonly storms: readonly Storm[];
  readonly throughput: readonly Throughput[];
  readonly coldStarts: readonly ColdStart[];
  readonly history: HistoryFigures;
}

const ms = (v: number) => (Number.isFinite(v) ? `${v < 10 ? v.toFixed(1) : v.toFixed(0)} ms` : '–');
const times = (v: number) => (Number.isFinite(v) ? `${v.toFixed(2)}x` : '–');
const yes = (ok: boolean) => (ok ? 'yes' : 'no');

/** The median ms from spawn to first 200 of one cold-start variant; NaN if it was not measured. */
function coldStartMedian(coldStarts: readonly ColdStart[], key: ColdStartKey): number {
  return coldStarts.find((c) => c.key === key)?.first200.median ?? Number.NaN;
}

/** Judges issue 5's targets (ratios, on the emulator, this machine). */
export function targets({ ledgers, storms, coldStarts }: Results) {
  const { project, literal } = ledgers;
  const speedup = literal.perRun.median / project.perRun.median;
  const dupCalls = project.callsPerDuplicate;
  const storm = (where: Storm['where'], ledger: string) => {
    const s = storms.find((s) => s.where === where && s.ledger === ledger && s.size === 200);
    return s && `${ms(s.allAnsweredMs)}, ${s.errors} errors`;
  };
  const atLedger = storms.find(
    (s) => s.where === 'in process' && s.ledger === LEDGERS.project && s.size === 200,
  );
  const cold = coldStartMedian(coldStarts, 'projectCache') / coldStartMedian(coldStarts, 'hello');
  const floor = coldStartMedian(coldStarts, 'floor') / coldStartMedian(coldStarts, 'hello');
  return [
    {
      target: 'Firestore calls per processed run <= 2',
      measured: `${project.callsPerRun}`,
      met: yes(project.callsPerRun <= 2),
    },
    {
      target: 'calls per duplicate 1 (at most 2)',
      measured: `${dupCalls}`,
      met: dupCalls <= 1 ? 'yes' : dupCalls <= 2 ? 'within the limit of 2' : 'no',
    },
    {
      target: 'ledger >= 4x faster than (a) per run',
      measured: `(a) / project = ${times(speedup)}`,
      met: yes(speedup >= 4),
    },
    {
      target: '200-duplicate storm at the ledger < 1 s, 0 errors',
      measured: atLedger
        ? [
            storm('in process', LEDGERS.project),
            `over 10 instances ${storm('in process', STORM_LEDGERS.spread)}`,
            `(a) ${storm('in process', LEDGERS.literal)}`,
            `HTTP ${storm('HTTP', LEDGERS.project)}`,
          ].join('; ')
        : '–',
      met: atLedger ? yes(atLedger.allAnsweredMs < 1000 && atLedger.errors === 0) : 'not measured',
    },
    {
      target: 'cold start <= 1.5x hello world',
      measured: `${times(cold)} as deployed; the floor ${times(floor)}`,
      met: Number.isFinite(cold) ? yes(cold <= 1.5) : 'not measured',
    },
  ];
}

/** A plain-text table: a title, then one column per entry of `columns` (header → cell). */
function table<T>(title: string, rows: readonly T[], columns: Record<string, (row: T) => string>) {
  if (rows.length === 0) return '';
  const cells = [Object.keys(columns), ...rows.map((r) => Object.values(columns).map((c) => c(r)))];
  const widths = cells[0]?.map((_, i) => Math.max(...cells.map((r) => r[i]?.length ?? 0))) ?? [];
  const line = (r: readonly string[]) =>
    r
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join(' | ')
      .trimEnd();
  const [header = [], ...body] = cells;
  return [title, line(header), widths.map((w) => '-'.repeat(w)).join('-|-'), ...body.map(line)]
    .join('\n')
    .concat('\n');
}

/** The tables, as printed. */
export function render(r: Results, summary: string): string {
  const base = r.ledgers.project;
  const hello = coldStartMedian(r.coldStarts, 'hello');
  const floor = coldStartMedian(r.coldStarts, 'floor');
  const helloRate = (t: Throughput) =>
    r.throughput.find((h) => h.fn === 'hello world' && h.concurrency === t.concurrency)
      ?.runsPerSecond ?? Number.NaN;
  return [
    table(
      `Ledger in process: claim + complete of a new run, then a duplicate claim of it (${base.perRun.n} each, interleaved)`,
      Object.entries(r.ledgers) as [LedgerKey, LedgerFigures][],
      {
        ledger: ([k]) => LEDGERS[k],
        'run median': ([, f]) => ms(f.perRun.median),
        'run p95': ([, f]) => ms(f.perRun.p95),
        'run vs project': ([, f]) => times(f.perRun.median / base.perRun.median),
        'dup median': ([, f]) => ms(f.perDuplicate.median),
        'dup p95': ([, f]) => ms(f.perDuplicate.p95),
        'dup vs project': ([, f]) => times(f.perDuplicate.median / base.perDuplicate.median),
        'Firestore calls per run': ([, f]) => `${f.callsPerRun}`,
        'per duplicate': ([, f]) => `${f.callsPerDuplicate}`,
      },
    ),
    table(
      'Storms: N concurrent deliveries of one new run (in process: runOnce, no-op job; HTTP: the function, a 1 s job)',
      r.storms,
      {
        where: (s) => s.where,
        ledger: (s) => s.ledger,
        N: (s) => `${s.size}`,
        executions: (s) => `${s.executions}`,
        errors: (s) => `${s.errors}`,
        'all answered': (s) => ms(s.allAnsweredMs),
        'half answered': (s) => ms(s.medianAnsweredMs),
        'Firestore calls': (s) => `${s.calls}`,
        answers: (s) => s.answers,
      },
    ),
    table('HTTP throughput: new runs per second, one function process (autocannon)', r.throughput, {
      function: (t) => t.fn,
      concurrency: (t) => `${t.concurrency}`,
      'runs/s': (t) => `${t.runsPerSecond}`,
      'vs hello': (t) => times(t.runsPerSecond / helloRate(t)),
      p50: (t) => ms(t.latencyP50Ms),
      p99: (t) => ms(t.latencyP99Ms),
      errors: (t) => `${t.errors}`,
    }),
    table('Cold start: spawn -> listening -> first 200 on a new run (medians)', r.coldStarts, {
      function: (c) => c.label,
      starts: (c) => `${c.first200.n}`,
      listening: (c) => ms(c.listening.median),
      'first 200 - listening': (c) => ms(c.first200.median - c.listening.median),
      'first 200': (c) => ms(c.first200.median),
      'vs hello': (c) => times(c.first200.median / hello),
      'vs floor': (c) => times(c.first200.median / floor),
    }),
    table(
      'Run history: `npm run runs` over a */5 job (1 slot in 50 missed), and a processed run with its check of 5 earlier slots',
      [r.history],
      {
        days: (h) => `${h.days}`,
        slots: (h) => `${h.slots}`,
        'readHistory in process': (h) => ms(h.inProcessMs),
        'ops/runs.ts --json (process)': (h) => ms(h.commandMs),
        'target < 5 s': (h) => yes(h.commandMs < 5000),
        'Firestore calls per processed run with the check': (h) => `${h.callsPerRunWithCheck}`,
      },
    ),
    table(`Targets (${summary})`, targets(r), {
      target: (t) => t.target,
      measured: (t) => t.measured,
      met: (t) => t.met,
    }),
  ]
    .filter((t) => t !== '')
    .join('\n');
}
