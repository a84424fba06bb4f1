/**
 * `npm run runs -- --backfill`: delivers a window's missed slots as Scheduler would, with the
 * rules that keep a backfill from running a slot twice:
 *
 * - **Retention.** A slot older than `RETENTION_SECONDS` is never delivered: its record may have
 *   been deleted by the TTL policy, so "no record" does not mean "never ran" (a fresh emulator is
 *   the same case). The function refuses such a delivery too (`policy/schedule-time.ts`).
 * - **First record.** By default only slots after the job's oldest slot with a record in the
 *   window: before it the job may not have existed, or its records are gone
 *   (`--include-before-first-record` delivers the missed ones too, still within the retention).
 *   These are the slots the table shows `not judged (before first record)`, by the same rule
 *   (`noRunRows`), and the summary counts them all, missed or still inside their retry window.
 * - **Shown first.** The slots are listed with their count before anything is sent; `--dry-run`
 *   stops there; a terminal asks for confirmation; a script passes `--yes`. Without a terminal and
 *   without `--yes`, nothing is delivered.
 * - **Paced.** One delivery at a time, {@link BACKFILL_PAUSE_MS} apart, at most
 *   {@link MAX_BACKFILL} per call (the oldest first; run it again for the rest).
 * - **Scoped.** Each delivery carries the key scope the listing was read in (`--scope
 *   NAME=VALUE`), as the function's configuration reads it; an answer whose run id is not the
 *   listed slot's means the function's scope differs from this command's, and fails the backfill.
 */
import { createInterface } from 'node:readline/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { BACKFILL_HEADER } from '../function/scheduler-request.ts';
import type { DeclaredJob } from '../policy/job-declaration.ts';
import { toUtcRfc3339 } from '../policy/schedule.ts';
import {
  forcedRunToleranceMs,
  oldestAcceptedTime,
} from '../policy/schedule-time.ts';
import {
  type Answer,
  answerLine,
  type DeliveryTarget,
  deliver,
  schedulerHeaders,
} from './deliver.ts';
import { BEFORE_FIRST_RECORD, countedRows, noRunRows } from './format-runs.ts';
import type { SlotRow } from './slot-history.ts';

/** The most slots one `--backfill` delivers: more would hit a downstream in one burst. */
export const MAX_BACKFILL = 100;
/** The pause between two deliveries of a backfill, ms. */
export const BACKFILL_PAUSE_MS = 500;

/** A missed slot a backfill leaves alone, and why. */
export interface Withheld {
  readonly row: SlotRow;
  readonly reason: 'retention' | 'before_first_record' | 'cap';
}

/** What a backfill would deliver, and what it leaves alone. */
export interface BackfillPlan {
  /** The slots to deliver, oldest first, at most {@link MAX_BACKFILL}. */
  readonly deliver: readonly SlotRow[];
  readonly withheld: readonly Withheld[];
}

/** What {@link planBackfill} judges by. */
export interface BackfillRules {
  /** The time the window ends at (`--now`, or the clock). */
  readonly now: Date;
  /** `RETENTION_SECONDS`, ms. */
  readonly retentionMs: number;
  /** `FORCED_RUN_TOLERANCE_SECONDS`, ms. */
  readonly forcedRunToleranceMs: number;
  /** Deliver missed slots before the job's oldest slot with a record in the window too. */
  readonly includeBeforeFirstRecord?: boolean;
  /**
   * Jobs with a record before the window (`ops/runs.ts` asks): they existed all along, so their
   * missed slots before the window's first record are delivered too, as `--check` counts them.
   */
  readonly seenBefore?: ReadonlySet<string>;
}

/**
 * Which missed slots of `rows` (every job's, oldest first per job) a backfill delivers.
 *
 * @example const plan = planBackfill(rows, jobs, { now, retentionMs, forcedRunToleranceMs: 60_000 });
 */
export function planBackfill(
  rows: readonly SlotRow[],
  jobs: readonly DeclaredJob[],
  rules: BackfillRules,
): BackfillPlan {
  const chosen: SlotRow[] = [];
  const withheld: Withheld[] = [];
  for (const job of jobs) {
    const own = rows
      .filter((row) => row.job === job.id && row.kind === 'slot')
      .sort((a, b) => a.slot.getTime() - b.slot.getTime());
    const tolerance = forcedRunToleranceMs(job, rules.forcedRunToleranceMs);
    const oldest = oldestAcceptedTime(
      rules.now,
      rules.retentionMs,
      tolerance,
    ).getTime();
    // The slots the table shows before the job's first record, by the table's own rule.
    const early = noRunRows(own, countedRows(own, rules.seenBefore));
    for (const row of own) {
      if (early.has(row) && !deliversEarly(row, rules)) {
        withheld.push({ row, reason: 'before_first_record' });
        continue;
      }
      if (row.state !== 'missed' || !row.final) {
        continue;
      }
      if (row.slot.getTime() < oldest) {
        withheld.push({ row, reason: 'retention' });
      } else {
        chosen.push(row);
      }
    }
  }
  chosen.sort((a, b) => a.slot.getTime() - b.slot.getTime());
  for (const row of chosen.slice(MAX_BACKFILL)) {
    withheld.push({ row, reason: 'cap' });
  }
  return { deliver: chosen.slice(0, MAX_BACKFILL), withheld };
}

/**
 * Whether a slot before its job's first record is delivered: only with
 * `--include-before-first-record`, and only once missed (past its retry window); one still inside
 * it is left alone even then.
 */
function deliversEarly(row: SlotRow, rules: BackfillRules): boolean {
  return (
    rules.includeBeforeFirstRecord === true &&
    row.state === 'missed' &&
    row.final
  );
}

/**
 * The line for the slots left alone before their job's first record: as many as the table shows
 * {@link BEFORE_FIRST_RECORD} (the same rule, `noRunRows`), and how many of them
 * `--include-before-first-record` would deliver (the missed ones, within the retention).
 */
function beforeFirstRecordSummary(early: readonly SlotRow[]): string {
  const missed = early.filter((row) => row.state === 'missed').length;
  const open = early.length - missed;
  const counted = `runs --backfill: ${early.length} slot(s) left alone: ${BEFORE_FIRST_RECORD}, as the table shows them`;
  if (missed === 0) {
    return `${counted}; all ${open} still inside their retry window, not missed (yet): they may still run`;
  }
  const include = `--include-before-first-record delivers the ${missed} of them past their retry window (those within RETENTION_SECONDS)`;
  const rest =
    open === 0
      ? ''
      : `; the other ${open} are still inside their retry window, not missed (yet)`;
  return `${counted} (before the job's first record in the window, the job may not have existed, or its records are gone): ${include}${rest}`;
}

/** The lines that say what a backfill will do and leave alone, for stderr. */
export function backfillSummary(
  plan: BackfillPlan,
  retentionMs: number,
): string[] {
  const lines = plan.deliver.map(
    (row) => `  ${row.job} ${toUtcRfc3339(row.slot)}`,
  );
  const count = (reason: Withheld['reason']) =>
    plan.withheld.filter((w) => w.reason === reason).length;
  const out = [
    `runs --backfill: ${plan.deliver.length} missed slot(s) to deliver, oldest first:`,
  ];
  out.push(...lines);
  if (count('retention') > 0) {
    out.push(
      `runs --backfill: ${count('retention')} missed slot(s) left alone: older than RETENTION_SECONDS (${retentionMs / 1000} s), their records may have been deleted, so they may have run (run one by hand as a manual run: npm run trigger -- JOB)`,
    );
  }
  if (count('before_first_record') > 0) {
    const early = plan.withheld
      .filter((w) => w.reason === 'before_first_record')
      .map((w) => w.row);
    out.push(beforeFirstRecordSummary(early));
  }
  if (count('cap') > 0) {
    out.push(
      `runs --backfill: ${count('cap')} more missed slot(s) beyond the ${MAX_BACKFILL} one call delivers; run the command again once these are done`,
    );
  }
  return out;
}

/** How a backfill asks before delivering, and the key scope its deliveries carry. */
export interface Confirmation {
  /** The scope's headers and query parameters (`scopeRequest`); none by default. */
  readonly scope?: {
    readonly headers: Readonly<Record<string, string>>;
    readonly query: Readonly<Record<string, string>>;
  };
  readonly dryRun?: boolean | undefined;
  readonly yes?: boolean | undefined;
  /** Whether stdin and stderr are a terminal to ask on. */
  readonly interactive: boolean;
}

/**
 * Whether to go ahead: `--dry-run` never, `--yes` always, a terminal when the user types `y`;
 * without a terminal and without `--yes`, never (and says why).
 */
async function confirmed(
  count: number,
  target: DeliveryTarget,
  how: Confirmation,
): Promise<boolean> {
  if (how.dryRun) {
    console.error('runs --backfill: --dry-run: nothing delivered');
    return false;
  }
  if (how.yes) {
    return true;
  }
  if (!how.interactive) {
    console.error(
      'runs --backfill: nothing delivered: there is no terminal to confirm on; check the list above and pass --yes to deliver it',
    );
    return false;
  }
  const prompt = createInterface({
    input: process.stdin,
    output: process.stderr,
  });
  try {
    const answer = await prompt.question(
      `Deliver ${count} slot(s) to ${target.url}? [y/N] `,
    );
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    prompt.close();
  }
}

/**
 * Shows the plan, asks, then delivers it one slot at a time, {@link BACKFILL_PAUSE_MS} apart, with
 * the scope's headers and query parameters, and prints what each got.
 *
 * @returns the exit status: 0 if every delivery got a 2xx naming the listed slot's run id (or there
 *   was nothing to do), 1 if one did not, or if nothing was delivered for want of a confirmation.
 */
export async function runBackfill(
  plan: BackfillPlan,
  retentionMs: number,
  resolve: () => DeliveryTarget,
  how: Confirmation,
): Promise<number> {
  for (const line of backfillSummary(plan, retentionMs)) {
    console.error(line);
  }
  if (plan.deliver.length === 0) {
    return 0;
  }
  const target = resolve();
  if (!(await confirmed(plan.deliver.length, target, how))) {
    return how.dryRun ? 0 : 1;
  }
  let failures = 0;
  for (const [i, row] of plan.deliver.entries()) {
    if (i > 0) {
      await sleep(BACKFILL_PAUSE_MS);
    }
    // Marked as a backfill: a slot the policy `skip` blocks stays missed instead of skipped.
    const headers = schedulerHeaders(row.job, row.slot, {
      [BACKFILL_HEADER]: 'true',
      ...how.scope?.headers,
    });
    const answer: Answer = await deliver(target, headers, how.scope?.query);
    console.log(
      answerLine(`backfill ${row.job} ${toUtcRfc3339(row.slot)}`, answer),
    );
    if (answer.status < 200 || answer.status >= 300) {
      failures++;
    } else if (answer.runId !== undefined && answer.runId !== row.runId) {
      // Every later delivery would be misnamed the same way: stop at the first.
      console.error(
        `runs --backfill: ${row.job} ${toUtcRfc3339(row.slot)}: the function ran it as ${answer.runId}, not the listed ${row.runId}: its key scope (RUN_KEY_SCOPE, RUN_KEY_SCOPE_HEADERS, RUN_KEY_SCOPE_PARAMS, --scope) differs from this command's; nothing more delivered; check the slot with the function's scope`,
      );
      return 1;
    }
  }
  if (failures > 0) {
    console.error(
      `runs --backfill: ${failures} of ${plan.deliver.length} slot(s) not run (answers above): they stay missed; run the backfill again once the cause is gone`,
    );
  }
  return failures > 0 ? 1 : 0;
}
