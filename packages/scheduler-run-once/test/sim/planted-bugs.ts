/**
 * `npm run simulate:planted -- [--histories N] [--seed S] [--only NAME]`: plants each bug of
 * {@link PLANTED_BUGS} in a scratch copy of the product, one at a time, and runs the simulator on
 * it; a bug is found when the simulator exits non-zero. Issue 40's measure of the simulator: the
 * kinds of bug a plausible change plants (an unfenced or wrong-clock lease write, a claim accepting
 * another attempt, overlap and lock mistakes, off-by-one retry arithmetic, pauses, backfill, the
 * answer to a live claim), and the claim that stranded its slot before the claim's short lease.
 * The seed is random unless given, so each run judges other histories; it prints the seed.
 *
 * Each edit must find its text exactly once: a planted bug whose code changed fails loudly here
 * instead of passing for found. For occasional runs (about a minute a bug), never `npm test`.
 */
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { nodeModulesWithTsc } from '../../src/dev/local-processes.ts';

/** One text edit of one file: `find` must occur exactly once. */
interface Edit {
  readonly file: string;
  readonly find: string;
  readonly replace: string;
}

/** A plausible bug, as one or more edits of the product. */
interface PlantedBug {
  readonly name: string;
  /** What the bug breaks, in the promise's words. */
  readonly breaks: string;
  readonly edits: readonly Edit[];
}

/** The bugs planted, one at a time. */
export const PLANTED_BUGS: readonly PlantedBug[] = [
  {
    name: 'claim-strands-its-slot',
    breaks:
      'a claim answered late holds its run a whole lease (the product before issue 40)',
    edits: [
      {
        file: 'src/core/ledger.ts',
        find: 'this.#claimLeaseMs = Math.min(options.leaseMs, claimLeaseMs);',
        replace: 'this.#claimLeaseMs = options.leaseMs;',
      },
      {
        file: 'src/core/ledger.ts',
        find: 'const decided = this.#isUnanswered(runId, read.record)',
        replace: 'const decided = false',
      },
    ],
  },
  {
    name: 'lease-in-seconds',
    breaks:
      'a lease written in the wrong unit (seconds as ms) lapses at once: takeovers run twice',
    edits: [
      {
        file: 'src/core/record-writes.ts',
        find: '[Field.leaseMs]: leaseMs,',
        replace: '[Field.leaseMs]: Math.max(1, Math.round(leaseMs / 1000)),',
      },
    ],
  },
  {
    name: 'lease-on-instance-clock',
    breaks: "a lease stamped by the instance's clock, not Firestore's",
    edits: [
      {
        file: 'src/core/record-writes.ts',
        find: '[Field.leasedAt]: FieldValue.serverTimestamp(),',
        replace: '[Field.leasedAt]: new Date(),',
      },
    ],
  },
  {
    name: 'claim-accepts-another-attempt',
    breaks:
      "a claim that finds another attempt's in_progress record takes it as its own",
    edits: [
      {
        file: 'src/core/ledger.ts',
        find: 'isOwn(attemptId, RunStatus.InProgress, read.record) && read.updateTime !== undefined',
        replace:
          "read.record?.status === 'in_progress' && read.updateTime !== undefined",
      },
    ],
  },
  {
    name: 'completion-over-another-attempt',
    breaks:
      "a fenced write that lost its race retries on another attempt's record",
    edits: [
      {
        file: 'src/core/ledger.ts',
        find: 'isOwn(claim.attemptId, RunStatus.InProgress, record) && updateTime !== undefined;',
        replace: 'record !== undefined && updateTime !== undefined;',
      },
    ],
  },
  {
    name: 'skip-ignores-holder-lease',
    breaks:
      'a `skip`/`wait` job blocked by a holder whose lease lapsed (a dead holder)',
    edits: [
      {
        file: 'src/policy/overlap.ts',
        find: 'const holderLive = (record !== undefined && isLeaseLive(record, readTime)) || heldHere(holder);',
        replace:
          "const holderLive = (record !== undefined && record.status === 'in_progress') || heldHere(holder);",
      },
    ],
  },
  {
    name: 'lock-ignores-live-holder',
    breaks: 'a `skip`/`wait` job runs beside the live run holding its lock',
    edits: [
      {
        file: 'src/policy/overlap.ts',
        find: 'if (holderLive || holderComing) {',
        replace: 'if (holderComing) {',
      },
    ],
  },
  {
    name: 'own-lock-blocks',
    breaks: "a run's retry is blocked by the lock its own earlier attempt took",
    edits: [
      {
        file: 'src/policy/overlap.ts',
        find: 'const holder = named === runId ? undefined : named;',
        replace: 'const holder = named;',
      },
    ],
  },
  {
    name: 'retry-count-off-by-one',
    breaks: 'a final failure reported one retry early',
    // In lastRetrySentMs, which decides whether a failing attempt's failure is final (since stop
    // 64); the same edit in makesRetry, the target before, now moves only catch-up's retries and a
    // check's first read, and 1,000 histories of seed 20261207 did not find it (stop 69).
    edits: [
      {
        file: 'src/policy/retry-policy.ts',
        find: 'for (let n = 0; n < settings.retryCount; n++) {',
        replace: 'for (let n = 0; n + 1 < settings.retryCount; n++) {',
      },
    ],
  },
  {
    name: 'backoff-off-by-one',
    breaks:
      'back-offs one doubling ahead of Scheduler: windows judged too short',
    edits: [
      {
        file: 'src/policy/retry-policy.ts',
        find: 'const doubled = min * 2 ** Math.min(n, d);',
        replace: 'const doubled = min * 2 ** Math.min(n + 1, d);',
      },
    ],
  },
  {
    name: 'final-failure-ignores-pending-retry',
    breaks:
      'the failing attempt reports its final failure while a retry Scheduler decided on is coming',
    edits: [
      {
        file: 'src/policy/final-failure.ts',
        find: 'if (retryMayStillCome(job, slot, attempt.firstClaimedAt, now)) {',
        replace: 'if (false) {',
      },
    ],
  },
  {
    name: 'backfill-reopens-completed',
    breaks: 'a backfill delivery runs a completed run again',
    edits: [
      {
        file: 'src/core/run-record.ts',
        find: 'if (isCompleted(record)) {',
        replace: 'if (isCompleted(record) && !reopenReported) {',
      },
    ],
  },
  {
    name: 'live-claim-answered-200',
    breaks:
      'a delivery meeting a live claim is answered 200, so Scheduler never retries it',
    edits: [
      {
        file: 'src/function/outcomes.ts',
        find: 'in_progress: 409,',
        replace: 'in_progress: 200,',
      },
    ],
  },
  {
    name: 'cursor-past-raced-slot',
    breaks: 'the missed-run cursor moves past a slot whose report did not land',
    edits: [
      {
        file: 'src/policy/missed-runs.ts',
        find: 'const next = raced !== undefined && raced < judged.next ? raced : judged.next;',
        replace: 'const next = judged.next;',
      },
    ],
  },
  {
    name: 'forced-run-tolerance-unbounded',
    breaks:
      "a forced-run tolerance past half the schedule's gap takes a slot for a forced run",
    edits: [
      {
        file: 'src/policy/schedule-time.ts',
        find: 'return gap === undefined ? configuredMs : Math.min(configuredMs, Math.floor(gap / 2));',
        replace: 'return configuredMs * 4;',
      },
    ],
  },
  {
    name: 'unanswered-release-forgotten',
    breaks:
      'a retry on the instance whose release went unanswered refused behind that dead attempt until its lease lapses',
    edits: [
      {
        file: 'src/core/ledger.ts',
        find: 'this.#rememberUnanswered(claim.runId, claim.attemptId);',
        replace: '',
      },
    ],
  },
  {
    name: 'run-id-format-changed',
    breaks:
      'a version that names runs otherwise than the deployed one finds none of its records: a rolling deploy runs their slots again',
    edits: [
      {
        file: 'src/core/run-key.ts',
        find: "const KEY_VERSION = 'scheduler-run/v1';",
        replace: "const KEY_VERSION = 'scheduler-run/v2';",
      },
    ],
  },
  {
    name: 'claims-stamp-taken-for-declared',
    breaks:
      'a schedule changed before any check saw the old one: the first check judges the old span by the new rule and reports minutes Scheduler never had as missed',
    edits: [
      {
        file: 'src/policy/run-plan.ts',
        find: 'const claimedUnder = { schedule: job.schedule, timeZone: job.timeZone };',
        replace: 'const claimedUnder = undefined;',
      },
    ],
  },
  {
    name: 'cursor-ahead-read',
    breaks:
      "another version's cursor a day ahead of the closed boundary is read as a cursor: the check moves past a day of slots it never judged, and says nothing",
    edits: [
      {
        file: 'src/policy/missed-run-cursor.ts',
        find: 'now.getTime() - closedAfterMs(job) + CURSOR_CLOCK_SLACK_MS',
        replace: 'Number.POSITIVE_INFINITY',
      },
    ],
  },
];

/** What the simulator made of one planted bug. */
interface Verdict {
  readonly name: string;
  readonly found: boolean;
  readonly seconds: number;
  readonly detail: string;
}

/** The folders the simulator loads, copied into each scratch product. */
const COPIED = [
  'src',
  'bin',
  'scripts',
  'test',
  'package.json',
  'tsconfig.json',
];

/**
 * Where `find` stands in `text`, whitespace aside (the formatter may wrap a line), as
 * `[start, end)` spans of `text`, one per occurrence.
 */
function spansOf(text: string, find: string): [number, number][] {
  const positions: number[] = [];
  let compact = '';
  for (let i = 0; i < text.length; i++) {
    if (!/\s/.test(text[i] as string)) {
      compact += text[i];
      positions.push(i);
    }
  }
  const needle = find.replace(/\s+/g, '');
  const spans: [number, number][] = [];
  for (
    let at = compact.indexOf(needle);
    at !== -1;
    at = compact.indexOf(needle, at + 1)
  ) {
    const last = positions[at + needle.length - 1] as number;
    spans.push([positions[at] as number, last + 1]);
  }
  return spans;
}

/**
 * Applies `edits` to the scratch product at `root`; throws if a text is not there exactly once
 * (whitespace aside, so a wrapped line still matches).
 */
function plant(root: string, edits: readonly Edit[]): void {
  for (const { file, find, replace } of edits) {
    const path = join(root, file);
    const text = readFileSync(path, 'utf8');
    const spans = spansOf(text, find);
    const [span] = spans;
    if (spans.length !== 1 || span === undefined) {
      throw new Error(
        `${file}: "${find}" occurs ${spans.length} times, not once: update the bug`,
      );
    }
    writeFileSync(path, text.slice(0, span[0]) + replace + text.slice(span[1]));
  }
}

/** Runs the simulator in `root`: found when it exits non-zero. */
function simulate(
  root: string,
  histories: number,
  seed: number,
): Omit<Verdict, 'name'> {
  const started = performance.now();
  const args = [
    'test/sim/cli.ts',
    '--histories',
    String(histories),
    '--seed',
    String(seed),
  ];
  const run = spawnSync(process.execPath, [...args, '--first-failure'], {
    cwd: root,
    encoding: 'utf8',
    timeout: 600_000,
    env: { ...process.env, METADATA_SERVER_DETECTION: 'none' },
  });
  const seconds = (performance.now() - started) / 1000;
  const output = `${run.stdout}\n${run.stderr}`;
  const firstLine =
    output.split('\n').find((line) => /invariant|violat|fail/i.test(line)) ??
    '';
  return {
    found: run.status !== 0,
    seconds,
    detail: firstLine.trim().slice(0, 160),
  };
}

/** The product as it is, planted with nothing: the control every verdict needs. */
const NO_BUG: PlantedBug = {
  name: '(none: the control)',
  breaks: 'nothing',
  edits: [],
};

/** Plants each bug in a fresh copy of the product and simulates it. */
export function judgeBugs(
  bugs: readonly PlantedBug[],
  histories: number,
  seed: number,
): Verdict[] {
  const repo = resolve(import.meta.dirname, '../..');
  const verdicts: Verdict[] = [];
  for (const bug of [NO_BUG, ...bugs]) {
    const root = mkdtempSync(join(tmpdir(), `planted-${bug.name}-`));
    try {
      for (const entry of COPIED) {
        cpSync(join(repo, entry), join(root, entry), { recursive: true });
      }
      symlinkSync(nodeModulesWithTsc(), join(root, 'node_modules'));
      plant(root, bug.edits);
      verdicts.push({ name: bug.name, ...simulate(root, histories, seed) });
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }
  return verdicts;
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      histories: { type: 'string', default: '1000' },
      seed: { type: 'string' },
      only: { type: 'string' },
    },
  });
  const seed =
    values.seed === undefined ? Date.now() % 2 ** 31 : Number(values.seed);
  const bugs = PLANTED_BUGS.filter(
    (bug) => values.only === undefined || bug.name === values.only,
  );
  if (bugs.length === 0) {
    console.error(`planted-bugs: no bug named ${values.only}`);
    process.exit(2);
  }
  console.log(
    `planting ${bugs.length} bug(s), ${values.histories} histories each, seed ${seed}`,
  );
  const [control, ...verdicts] = judgeBugs(
    bugs,
    Number(values.histories),
    seed,
  );
  if (control === undefined || control.found) {
    console.error(
      `planted-bugs: the product with no bug planted fails: ${control?.detail}`,
    );
    process.exit(2);
  }
  for (const { name, found, seconds, detail } of verdicts) {
    const verdict = found ? 'found' : 'MISSED';
    console.log(
      `${verdict.padEnd(6)} ${name.padEnd(34)} ${seconds.toFixed(1).padStart(6)} s  ${detail}`,
    );
  }
  const missed = verdicts.filter((v) => !v.found).length;
  console.log(
    `${verdicts.length - missed} of ${verdicts.length} found (seed ${seed})`,
  );
  process.exit(missed === 0 ? 0 : 1);
}
