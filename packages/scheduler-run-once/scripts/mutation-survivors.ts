/**
 * The survivors of a mutation run (docs/tests.md, "Mutation testing"), read from Stryker's JSON
 * report (the mutation-testing-report-schema: per file, mutants with a status and a location whose
 * lines and columns count from 1).
 *
 * - `node scripts/mutation-survivors.ts ranges [REPORT]`: one Stryker `--mutate` range per
 *   surviving mutant (`file:line:column-line:column`, Stryker's columns counting from 0), what
 *   `stryker.survivors.config.mjs` mutates.
 * - `node scripts/mutation-survivors.ts score [FIRST] [LATER…]`: the first run's score, and the
 *   score once each later run over the survivors before it (the simulator's fault-biased pass,
 *   `mutate:faults`, its deep pass, `mutate:deep`, or the suite, `mutate:survivors`) has had its
 *   go; then every mutant that survived them all. Without a later report named, the suite's, if
 *   there is one. Exit 2 when a report is missing or unreadable.
 *
 * - `node scripts/mutation-survivors.ts reach REPORT COVERAGE_DIR`: the survivors of REPORT split by
 *   whether the simulator's histories reach their code, from V8's coverage of one unmutated run
 *   (`scripts/mutation-reach.ts`), per file, then each survivor with `reached` or `unreached`.
 *
 * REPORT and FIRST default to `reports/mutation/simulator.json`; without a LATER report named,
 * `score` reads `reports/mutation/suite.json` if it exists.
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { readCoverage, splitByReach } from './mutation-reach.ts';

export const SIMULATOR_REPORT = 'reports/mutation/simulator.json';
export const SUITE_REPORT = 'reports/mutation/suite.json';

interface Position {
  line: number;
  column: number;
}

/** One mutant as the report states it. */
export interface ReportedMutant {
  id: string;
  mutatorName: string;
  replacement?: string;
  status: string;
  location: { start: Position; end: Position };
}

/** A mutant with the file it lives in. */
export interface Mutant extends ReportedMutant {
  file: string;
}

/** Statuses that count as detected in Stryker's mutation score. */
const DETECTED = new Set(['Killed', 'Timeout']);
/** Statuses that count against it; the rest (errors, ignored) are left out of the score. */
const UNDETECTED = new Set(['Survived', 'NoCoverage']);

/**
 * The mutants of a Stryker JSON report, file by file.
 * @throws Error naming the file when it is missing or not a mutation report
 */
export function readMutants(reportPath: string): Mutant[] {
  let report: { files?: Record<string, { mutants?: ReportedMutant[] }> };
  try {
    report = JSON.parse(readFileSync(reportPath, 'utf8'));
  } catch (err) {
    throw new Error(
      `${reportPath}: cannot read a Stryker JSON report (${(err as Error).message}); run \`npm run mutate\` first`,
    );
  }
  if (report.files === undefined) {
    throw new Error(`${reportPath}: not a Stryker JSON report (no "files")`);
  }
  return Object.entries(report.files).flatMap(([file, entry]) =>
    (entry.mutants ?? []).map((mutant) => ({ ...mutant, file })),
  );
}

export function isSurvivor(mutant: Mutant): boolean {
  return UNDETECTED.has(mutant.status);
}

/**
 * A mutant's `--mutate` range. Stryker reads a range's line from 1 and its column from 0 (Babel's
 * positions); the report counts both from 1. A range takes every mutant whose node lies inside it,
 * so a survivor that replaces a block brings the block's other mutants along: {@link sameMutant}
 * picks the survivors out of the second report.
 */
export function mutateRange(mutant: Mutant): string {
  const { start, end } = mutant.location;
  return `${mutant.file}:${start.line}:${start.column - 1}-${end.line}:${end.column - 1}`;
}

/** The same mutant in two reports of the same sources (ids are not stable across runs). */
export function sameMutant(a: Mutant, b: Mutant): boolean {
  return (
    a.file === b.file &&
    a.mutatorName === b.mutatorName &&
    a.replacement === b.replacement &&
    a.location.start.line === b.location.start.line &&
    a.location.start.column === b.location.start.column &&
    a.location.end.line === b.location.end.line &&
    a.location.end.column === b.location.end.column
  );
}

/** `--mutate` ranges of every survivor in `reportPath`, without repeats. */
export function survivorRanges(reportPath = SIMULATOR_REPORT): string[] {
  return [
    ...new Set(readMutants(reportPath).filter(isSurvivor).map(mutateRange)),
  ];
}

/** Stryker's mutation score, in percent: detected over detected plus undetected. */
export function mutationScore(detected: number, undetected: number): number {
  const scored = detected + undetected;
  return scored === 0 ? 100 : (100 * detected) / scored;
}

function describe(mutant: Mutant): string {
  const { line, column } = mutant.location.start;
  const replacement = (mutant.replacement ?? '')
    .replace(/\s+/g, ' ')
    .slice(0, 80);
  return `${mutant.file}:${line}:${column} ${mutant.mutatorName} → ${replacement}`;
}

/**
 * The lines of `score`: the first run's score, the score after each later run (each over the
 * survivors of the runs before it: a first-run survivor counts as killed once any later run
 * detected it), and the mutants that survived every run.
 */
export function scoreLines(
  first: Mutant[],
  later: readonly Mutant[][],
): string[] {
  const detected = first.filter((m) => DETECTED.has(m.status)).length;
  const survivors = first.filter(isSurvivor);
  const lines = [
    `simulator alone: ${mutationScore(detected, survivors.length).toFixed(1)} % (${detected} detected, ${survivors.length} survived, ${first.length - detected - survivors.length} not scored)`,
  ];
  if (later.length === 0) {
    return lines;
  }
  let stillAlive = survivors;
  for (const [index, run] of later.entries()) {
    const before = stillAlive.length;
    stillAlive = stillAlive.filter((survivor) => {
      const again = run.find((m) => sameMutant(m, survivor));
      return again === undefined || !DETECTED.has(again.status);
    });
    const killed = survivors.length - stillAlive.length;
    lines.push(
      `with run ${index + 2} on the survivors: ${mutationScore(detected + killed, stillAlive.length).toFixed(1)} % (it killed ${before - stillAlive.length} of ${before}; a survivor missing from its report counts as alive)`,
    );
  }
  lines.push(
    '',
    `survived every run (${stillAlive.length}):`,
    ...stillAlive.map(describe),
  );
  return lines;
}

/** The lines of `reach`: per file, the survivors the histories reached and those they did not. */
export function reachLines(
  mutants: readonly Mutant[],
  coverageDir: string,
  root: string,
): string[] {
  const survivors = mutants.filter(isSurvivor);
  const { reached, unreached } = splitByReach(
    survivors,
    readCoverage(coverageDir),
    root,
  );
  const files = [...new Set(survivors.map((m) => m.file))].sort();
  const count = (list: readonly Mutant[], file: string) =>
    list.filter((m) => m.file === file).length;
  return [
    'file | survivors | reached | not reached',
    ...files.map(
      (file) =>
        `${file} | ${count(survivors, file)} | ${count(reached, file)} | ${count(unreached, file)}`,
    ),
    `all | ${survivors.length} | ${reached.length} | ${unreached.length}`,
    '',
    ...reached.map((m) => `reached ${describe(m)}`),
    ...unreached.map((m) => `unreached ${describe(m)}`),
  ];
}

function main(argv: string[]): number {
  const [command, first = SIMULATOR_REPORT, second] = argv;
  try {
    if (command === 'ranges') {
      console.log(survivorRanges(first).join('\n'));
      return 0;
    }
    if (command === 'reach') {
      if (second === undefined) {
        throw new Error(
          'reach needs a coverage directory: NODE_V8_COVERAGE=DIR node test/sim/cli.ts …',
        );
      }
      console.log(reachLines(readMutants(first), second, '.').join('\n'));
      return 0;
    }
    if (command === 'score') {
      // Without a later report named, the suite's run is optional: the first score alone.
      const named = argv.slice(2);
      const later =
        named.length > 0 || !existsSync(SUITE_REPORT) ? named : [SUITE_REPORT];
      console.log(
        scoreLines(readMutants(first), later.map(readMutants)).join('\n'),
      );
      return 0;
    }
  } catch (err) {
    console.error(`mutation-survivors: ${(err as Error).message}`);
    return 2;
  }
  console.error(
    'usage: node scripts/mutation-survivors.ts ranges [REPORT] | score [FIRST] [LATER…] | reach REPORT COVERAGE_DIR',
  );
  return 2;
}

// Run as a command, not when `stryker.survivors.config.mjs` imports it.
if (
  process.argv[1] !== undefined &&
  resolve(process.argv[1]) === import.meta.filename
) {
  process.exitCode = main(process.argv.slice(2));
}
