/**
 * What the in-process and HTTP figures share: sample summaries and the figures of one storm.
 */

/** Median and 95th percentile (nearest rank) of samples, ms. */
export interface Summary {
  readonly n: number;
  readonly median: number;
  readonly p95: number;
}

function quantile(sorted: readonly number[], q: number): number {
  const rank = Math.min(
    sorted.length - 1,
    Math.max(0, Math.ceil(q * sorted.length) - 1),
  );
  return sorted[rank] ?? Number.NaN;
}

/** Median and p95 of `samples`, to 0.1 ms. */
export function summarise(samples: readonly number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  const round = (ms: number) => Math.round(ms * 10) / 10;
  return {
    n: sorted.length,
    median: round(quantile(sorted, 0.5)),
    p95: round(quantile(sorted, 0.95)),
  };
}

/** One storm: `size` concurrent deliveries of one new run. */
export interface Storm {
  readonly where: 'in process' | 'HTTP';
  readonly ledger: string;
  readonly size: number;
  /** How often the job ran: must be 1. */
  readonly executions: number;
  /** Answers `unavailable` or `failed`, 5xx, throws and requests without an answer. */
  readonly errors: number;
  /** From the first delivery until every caller had its answer, ms. */
  readonly allAnsweredMs: number;
  /** Until half the callers had theirs, ms. */
  readonly medianAnsweredMs: number;
  /** Firestore calls the whole storm made, counted on the wire. */
  readonly calls: number;
  /** Each answer and how many got it, e.g. `in_progress 199, processed 1`. */
  readonly answers: string;
}

/** An answer to one delivery of a storm, `at` ms after the storm began. */
export interface Answer {
  readonly answer: string;
  readonly error: boolean;
  readonly at: number;
}

/** Fires `size` concurrent deliveries; resolves with every answer (a throw is an error). */
export function fire(
  size: number,
  deliver: (i: number) => Promise<Omit<Answer, 'at'>>,
): Promise<Answer[]> {
  const started = performance.now();
  return Promise.all(
    Array.from({ length: size }, (_, i) =>
      deliver(i)
        .catch((err: Error) => ({ answer: err.name, error: true }))
        .then((answer) => ({ ...answer, at: performance.now() - started })),
    ),
  );
}

/** The figures of a storm from its answers. */
export function stormFigures(
  storm: Pick<Storm, 'where' | 'ledger' | 'executions' | 'calls'>,
  answers: readonly Answer[],
): Storm {
  const counts = new Map<string, number>();
  for (const { answer } of answers) {
    counts.set(answer, (counts.get(answer) ?? 0) + 1);
  }
  const times = answers.map((a) => a.at).sort((a, b) => a - b);
  return {
    ...storm,
    size: answers.length,
    errors: answers.filter((a) => a.error).length,
    allAnsweredMs: Math.round(times.at(-1) ?? Number.NaN),
    medianAnsweredMs: Math.round(quantile(times, 0.5)),
    answers: [...counts]
      .sort((a, b) => b[1] - a[1])
      .map(([answer, n]) => `${answer} ${n}`)
      .join(', '),
  };
}
