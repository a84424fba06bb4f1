/**
 * Statistics and plain-text tables for the bench's figures.
 */

/** Median and 95th percentile (nearest rank) of samples, ms. */
export interface Summary {
  readonly n: number;
  readonly median: number;
  readonly p95: number;
}

/** The value at quantile `q` (0–1) of `samples`, nearest rank. */
export function quantile(samples: readonly number[], q: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}

/** Median and p95 of `samples`, rounded to 0.01 ms. */
export function summarise(samples: readonly number[]): Summary {
  return {
    n: samples.length,
    median: round(quantile(samples, 0.5)),
    p95: round(quantile(samples, 0.95)),
  };
}

/** `value` rounded to `digits` decimals. */
export function round(value: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** Counts of each value. */
export function histogram(values: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const v of values) counts[v] = (counts[v] ?? 0) + 1;
  return counts;
}

/** `{a: 1, b: 2}` as `a 1, b 2`. */
export function describeCounts(counts: Readonly<Record<string, number>>): string {
  return Object.entries(counts)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
}

/** A table with a title, aligned columns and a rule under the header. */
export function table(title: string, header: readonly string[], rows: readonly string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join(' | ')
      .trimEnd();
  return [
    title,
    line(header),
    widths.map((w) => '-'.repeat(w)).join('-|-'),
    ...rows.map(line),
    '',
  ].join('\n');
}

/** `12.3` as `12 ms`, `4.56` as `4.6 ms`, NaN as `–`. */
export function ms(value: number): string {
  return Number.isFinite(value) ? `${value < 10 ? value.toFixed(1) : value.toFixed(0)} ms` : '–';
}

/** `2.34` as `2.3×`. */
export function times(value: number): string {
  return Number.isFinite(value) ? `${value.toFixed(value < 10 ? 2 : 1)}×` : '–';
}
