/**
 * How dense the library's source reads, measured the way the models were (../shared/STYLE.md,
 * "What the fourth review found"): tokens per code line, unbraced one-line `if` bodies and
 * ternaries per 1,000 code lines, and function lengths. Density, not size: splitting a line or
 * adding a brace never makes a figure worse.
 *
 *   node scripts/density.ts            the table, one row per folder and the whole
 *   node scripts/density.ts --json     the same figures as JSON
 *   node scripts/density.ts --check    exit 1 when a target is missed (TARGETS below)
 *
 * Tokens come from Babel's TypeScript parser (`@babel/parser`, `tokens: true`): TypeScript 7 has
 * no compiler API. Comments are not tokens; a code line is a line that holds at least one token.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { parse } from '@babel/parser';

/** The library's root. */
const ROOT = join(import.meta.dirname, '..');

/**
 * The folders measured: what ships and runs (src, its operations commands, src/ops, in a row of
 * their own), the scripts and the simulator.
 */
export const FOLDERS = ['src', 'src/ops', 'scripts', 'test/sim'] as const;

/** Issue 41's targets for the library's source. */
export const TARGETS = {
  tokensPerCodeLine: 7,
  unbracedIfsPer1000: 15,
  longestFunctionLines: 60,
} as const;

/** The models' figures, measured over their whole source trees (STYLE.md). */
export const MODELS = [
  {
    name: 'Powertools idempotency',
    tokensPerCodeLine: 5.1,
    unbracedIfsPer1000: 8,
    ternariesPer1000: 3,
  },
  {
    name: 'functions-framework',
    tokensPerCodeLine: 5.6,
    unbracedIfsPer1000: 0,
    ternariesPer1000: 4,
  },
  {
    name: 'DBOS scheduler',
    tokensPerCodeLine: 7.0,
    unbracedIfsPer1000: 12,
    ternariesPer1000: 7,
  },
  {
    name: 'graphile-worker',
    tokensPerCodeLine: 4.9,
    unbracedIfsPer1000: 0,
    ternariesPer1000: 12,
  },
] as const;

/** What one file or folder measures. */
export interface Density {
  readonly files: number;
  readonly codeLines: number;
  readonly tokens: number;
  readonly unbracedIfs: number;
  readonly ternaries: number;
  /** Each function's length in code lines, its nested functions' included. */
  readonly functionLines: readonly number[];
}

interface Node {
  readonly type: string;
  readonly loc?: { start: { line: number }; end: { line: number } };
  readonly [key: string]: unknown;
}

const FUNCTION_TYPES = new Set([
  'FunctionDeclaration',
  'FunctionExpression',
  'ArrowFunctionExpression',
  'ClassMethod',
  'ClassPrivateMethod',
  'ObjectMethod',
]);

/** Calls `visit` on every node of the tree under `node`. */
function walk(node: unknown, visit: (node: Node) => void): void {
  if (Array.isArray(node)) {
    for (const child of node) {
      walk(child, visit);
    }
    return;
  }
  if (
    node === null ||
    typeof node !== 'object' ||
    typeof (node as Node).type !== 'string'
  ) {
    return;
  }
  visit(node as Node);
  for (const [key, child] of Object.entries(node)) {
    const isPosition = key === 'loc' || key === 'start' || key === 'end';
    const isComment = key === 'leadingComments' || key === 'trailingComments';
    if (!isPosition && !isComment) {
      walk(child, visit);
    }
  }
}

/** Whether `branch`, a branch of an `if`, is a statement without braces (an `else if` is not). */
function isUnbraced(branch: Node | null | undefined): boolean {
  if (branch === null || branch === undefined) {
    return false;
  }
  return branch.type !== 'BlockStatement' && branch.type !== 'IfStatement';
}

/** The lines of `code` that hold at least one token, comments aside. */
function codeLinesOf(tokens: readonly Node[]): Set<number> {
  const lines = new Set<number>();
  for (const token of tokens) {
    const isComment =
      token.type === 'CommentLine' || token.type === 'CommentBlock';
    if (!isComment && token.loc !== undefined) {
      for (
        let line = token.loc.start.line;
        line <= token.loc.end.line;
        line++
      ) {
        lines.add(line);
      }
    }
  }
  return lines;
}

/** How many of `lines` lie from `first` to `last`, both included. */
function countWithin(
  lines: ReadonlySet<number>,
  first: number,
  last: number,
): number {
  let count = 0;
  for (let line = first; line <= last; line++) {
    if (lines.has(line)) {
      count += 1;
    }
  }
  return count;
}

/** Measures one file's source text. */
export function measure(code: string): Density {
  const file = parse(code, {
    sourceType: 'module',
    plugins: ['typescript'],
    tokens: true,
  }) as unknown as { tokens: Node[]; program: Node };
  const tokens = file.tokens.filter(
    (t) => t.type !== 'CommentLine' && t.type !== 'CommentBlock',
  );
  const codeLines = codeLinesOf(tokens);
  let unbracedIfs = 0;
  let ternaries = 0;
  const functionLines: number[] = [];
  walk(file.program, (node) => {
    if (node.type === 'IfStatement') {
      const branches = [node.consequent, node.alternate] as (Node | null)[];
      unbracedIfs += branches.filter(isUnbraced).length;
    } else if (node.type === 'ConditionalExpression') {
      ternaries += 1;
    } else if (FUNCTION_TYPES.has(node.type) && node.loc !== undefined) {
      functionLines.push(
        countWithin(codeLines, node.loc.start.line, node.loc.end.line),
      );
    }
  });
  return {
    files: 1,
    codeLines: codeLines.size,
    tokens: tokens.length,
    unbracedIfs,
    ternaries,
    functionLines,
  };
}

/** The sum of several measures. */
function sum(measures: readonly Density[]): Density {
  return {
    files: measures.reduce((n, m) => n + m.files, 0),
    codeLines: measures.reduce((n, m) => n + m.codeLines, 0),
    tokens: measures.reduce((n, m) => n + m.tokens, 0),
    unbracedIfs: measures.reduce((n, m) => n + m.unbracedIfs, 0),
    ternaries: measures.reduce((n, m) => n + m.ternaries, 0),
    functionLines: measures.flatMap((m) => m.functionLines),
  };
}

/** Whether `file` is measured: TypeScript source, not a test file. */
function isMeasured(file: string): boolean {
  const isSource =
    file.endsWith('.ts') || file.endsWith('.cts') || file.endsWith('.mts');
  return isSource && !file.endsWith('.test.ts') && !file.endsWith('.d.ts');
}

/**
 * Every measured file under `folder` (relative to the library's root), less those under a folder
 * of FOLDERS nested in it, which have their own row.
 */
function filesUnder(folder: string): string[] {
  const entries = readdirSync(join(ROOT, folder), {
    recursive: true,
    encoding: 'utf8',
  });
  const nested = FOLDERS.filter((other) => other.startsWith(`${folder}/`));
  const isNested = (entry: string) =>
    nested.some((other) => join(folder, entry).startsWith(`${other}/`));
  return entries
    .filter((entry) => isMeasured(entry) && !isNested(entry))
    .map((entry) => join(ROOT, folder, entry));
}

/** The figures a reader compares, from a measure. */
export function figures(density: Density) {
  const per1000 = (count: number) =>
    (1000 * count) / Math.max(density.codeLines, 1);
  const sorted = [...density.functionLines].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)] ?? 0;
  return {
    files: density.files,
    codeLines: density.codeLines,
    tokensPerCodeLine: density.tokens / Math.max(density.codeLines, 1),
    unbracedIfsPer1000: per1000(density.unbracedIfs),
    ternariesPer1000: per1000(density.ternaries),
    medianFunctionLines: median,
    longestFunctionLines: sorted.at(-1) ?? 0,
    functionsOver60: sorted.filter(
      (lines) => lines > TARGETS.longestFunctionLines,
    ).length,
  };
}

/** Each folder's measure, and the whole library's. */
export function measureLibrary(): { folder: string; density: Density }[] {
  const rows = FOLDERS.map((folder) => {
    const measures = filesUnder(folder).map((file) =>
      measure(readFileSync(file, 'utf8')),
    );
    return { folder, density: sum(measures) };
  });
  return [
    ...rows,
    { folder: 'all', density: sum(rows.map((row) => row.density)) },
  ];
}

/** The targets `all` misses, each as a sentence. */
export function missedTargets(all: Density): string[] {
  const measured = figures(all);
  const missed: string[] = [];
  if (measured.tokensPerCodeLine > TARGETS.tokensPerCodeLine) {
    missed.push(
      `${measured.tokensPerCodeLine.toFixed(2)} tokens per code line (target ≤ ${TARGETS.tokensPerCodeLine})`,
    );
  }
  if (measured.unbracedIfsPer1000 > TARGETS.unbracedIfsPer1000) {
    missed.push(
      `${measured.unbracedIfsPer1000.toFixed(1)} unbraced if bodies per 1,000 code lines (target ≤ ${TARGETS.unbracedIfsPer1000})`,
    );
  }
  if (measured.functionsOver60 > 0) {
    missed.push(
      `${measured.functionsOver60} functions over ${TARGETS.longestFunctionLines} lines (longest ${measured.longestFunctionLines})`,
    );
  }
  return missed;
}

/** One table row. */
function row(cells: readonly (string | number)[]): string {
  return `| ${cells.join(' | ')} |`;
}

/** The table of every folder's figures, then the models'. */
function table(rows: readonly { folder: string; density: Density }[]): string {
  const header = [
    row([
      'folder',
      'files',
      'code lines',
      'tokens / line',
      'unbraced if / 1,000',
      'ternaries / 1,000',
      'median / longest function',
      'over 60',
    ]),
    row(['---', '---:', '---:', '---:', '---:', '---:', '---:', '---:']),
  ];
  const measured = rows.map(({ folder, density }) => {
    const f = figures(density);
    return row([
      folder,
      f.files,
      f.codeLines,
      f.tokensPerCodeLine.toFixed(2),
      f.unbracedIfsPer1000.toFixed(1),
      f.ternariesPer1000.toFixed(1),
      `${f.medianFunctionLines} / ${f.longestFunctionLines}`,
      f.functionsOver60,
    ]);
  });
  const models = MODELS.map((model) =>
    row([
      model.name,
      '',
      '',
      model.tokensPerCodeLine.toFixed(1),
      model.unbracedIfsPer1000,
      model.ternariesPer1000,
      '',
      '',
    ]),
  );
  return [...header, ...measured, ...models].join('\n');
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: { json: { type: 'boolean' }, check: { type: 'boolean' } },
  });
  const rows = measureLibrary();
  if (values.json) {
    const json = rows.map(({ folder, density }) => ({
      folder,
      ...figures(density),
    }));
    console.log(JSON.stringify(json, null, 2));
  } else {
    console.log(table(rows));
  }
  const all = rows.at(-1)?.density;
  const missed = all === undefined ? [] : missedTargets(all);
  if (values.check && missed.length > 0) {
    console.error(
      `density: ${relative(process.cwd(), ROOT) || '.'} misses its targets:`,
    );
    for (const sentence of missed) {
      console.error(`  - ${sentence}`);
    }
    process.exitCode = 1;
  }
}
