/** The pure parts of missed-run detection and the run audit: when a slot is judged, which deliveries check. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type DocumentData,
  FieldValue,
  type QueryDocumentSnapshot,
  Timestamp,
} from '@google-cloud/firestore';
import type { Logger } from '../../src/core/logger.ts';
import { claimFields } from '../../src/core/record-writes.ts';
import type { RunDocuments } from '../../src/core/run-documents.ts';
import {
  type RunDetails,
  type RunRecord,
  runRecordConverter,
} from '../../src/core/run-record.ts';
import { isJudgedSlot, rulesInForce } from '../../src/ops/check-rules.ts';
import {
  type DeclaredJob,
  defineJob,
  validateJobs,
} from '../../src/policy/job-declaration.ts';
import {
  type Cursor,
  checkDocumentId,
  cursorDocument,
  readCursor,
} from '../../src/policy/missed-run-cursor.ts';
import {
  isSighted,
  isUnreadable,
  type JudgedRule,
  judgedSlots,
  MAX_RULES,
  nextRules,
  readRules,
  ruleOf,
  rulesFromClaims,
  type Unreadable,
} from '../../src/policy/missed-run-rules.ts';
import {
  CHECK_PERIOD_MS,
  CURSOR_OF_SHORTER_WINDOW,
  isDueSlot,
  MissedRunCheck,
  reportedState,
} from '../../src/policy/missed-runs.ts';
import {
  judgingDelayMs,
  longestExecutionMs,
  makesRetry,
} from '../../src/policy/retry-policy.ts';

/** No retry follows a run's `attempts`-th failed attempt, `elapsedMs` after its first. */
const noRetryFollows = (
  config: Parameters<typeof makesRetry>[0],
  attempts: number,
  elapsedMs: number,
) => !makesRetry(config, attempts - 1, elapsedMs);

import type { StoredRecord } from '../../src/core/run-record.ts';
import { defineAuditJob, isAuditJob } from '../../src/policy/run-audit.ts';
import { planRun } from '../../src/policy/run-plan.ts';
import { closedAfterMs, slotVerdict } from '../../src/policy/slot-verdict.ts';

const [five, daily] = validateJobs([
  defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
  defineJob({
    id: 'daily',
    schedule: '30 2 * * *',
    timeZone: 'Europe/Berlin',
    run: () => {},
  }),
]);

describe('missed-run check timing', () => {
  it('judges a slot one attempt deadline after its retry window: 3750 s with the defaults', () => {
    assert.equal(closedAfterMs(five as never), 3_570_000 + 180_000);
  });

  it('makes only the first slot of each hour due', () => {
    const due = Array.from({ length: 24 }, (_, i) =>
      isDueSlot(five as never, new Date(Date.UTC(2026, 9, 16, 12, 5 * i))),
    );
    assert.deepEqual(
      due.map((d, i) => (d ? i * 5 : -1)).filter((m) => m >= 0),
      [0, 60],
    );
    assert.equal(CHECK_PERIOD_MS, 3_600_000);
  });

  it('makes every slot of a job that runs at most hourly due', () => {
    assert.equal(
      isDueSlot(daily as never, new Date('2026-10-16T00:30:00Z')),
      true,
    );
  });

  it('keeps one cursor per job and key scope', () => {
    assert.equal(checkDocumentId('five', []), 'five~check');
    const scoped = checkDocumentId('five', [['env', 'prod']]);
    assert.match(scoped, /^five~check~[0-9a-f]{16}$/);
    assert.notEqual(scoped, checkDocumentId('five', [['env', 'dev']]));
  });
});

describe('run audit declaration', () => {
  it('is a job like any other, recognised after validation', () => {
    const [audit, plain] = validateJobs([
      defineAuditJob({ id: 'run-audit', schedule: '*/30 * * * *' }),
      defineJob({ id: 'five', schedule: '*/5 * * * *', run: () => {} }),
    ]);
    assert.equal(audit?.schedule, '*/30 * * * *');
    assert.equal(isAuditJob(audit as never), true);
    assert.equal(isAuditJob(plain as never), false);
  });

  it('refuses to run outside the function', () => {
    const audit = defineAuditJob({ id: 'run-audit', schedule: '*/30 * * * *' });
    assert.throws(
      () => audit.run({} as never),
      /only inside the scheduled-job function/,
    );
  });
});

describe('the judging rules', () => {
  const UTC = 'Etc/UTC';
  const t = (hhmm: string) => Date.parse(`2026-10-16T${hhmm}:00Z`);

  it('judges slots up to twice the longest execution plus one attempt deadline after their time', () => {
    // The longest execution: the last retry sent within maxRetryDuration (3600 s), run to its deadline.
    assert.equal(longestExecutionMs(five as never), 3_600_000 + 180_000);
    assert.equal(judgingDelayMs(five as never), 2 * 3_780_000 + 180_000);
  });

  it('proves a final failure only when both Scheduler limits are spent, by the bounds a record gives', () => {
    const settings = {
      retryCount: 3,
      maxRetryDurationSeconds: 3600,
      minBackoffSeconds: 30,
      maxBackoffSeconds: 600,
      maxDoublings: 5,
    };
    assert.equal(
      noRetryFollows(settings, 4, 3_000_000),
      false,
      'the next back-off (240 s) still starts within the hour',
    );
    assert.equal(
      noRetryFollows(settings, 3, 3_599_000),
      false,
      'a retry still counts',
    );
    assert.equal(noRetryFollows(settings, 4, 3_000_001 + 600_000), true);
    assert.equal(
      noRetryFollows(
        { ...settings, retryCount: 0, maxRetryDurationSeconds: 0 },
        1,
        0,
      ),
      true,
    );
  });

  it('after a schedule change, judges old slots by the old rule, new by the new, and between only both', () => {
    const rules = nextRules(
      [{ schedule: '* * * * *', timeZone: UTC }],
      { schedule: '*/2 * * * *', timeZone: UTC },
      t('12:30'),
      t('12:20'),
      t('12:00'),
    );
    const { slots } = judgedSlots(
      rules,
      new Date(t('12:17')),
      new Date(t('12:35')),
      100,
    );
    assert.deepEqual(
      slots.map((d) => d.toISOString().slice(11, 16)),
      [
        '12:17',
        '12:18',
        '12:19',
        '12:20',
        '12:22',
        '12:24',
        '12:26',
        '12:28',
        '12:30',
        '12:32',
        '12:34',
      ],
    );
    assert.equal(isJudgedSlot(rules, new Date(t('12:19'))), true);
    assert.equal(isJudgedSlot(rules, new Date(t('12:21'))), false);
  });

  it('forgets a rule once it was replaced before the retained range', () => {
    const rules = nextRules(
      [
        { schedule: '* * * * *', timeZone: UTC, until: t('12:20') },
        { schedule: '*/2 * * * *', timeZone: UTC, since: t('12:30') },
      ],
      { schedule: '*/2 * * * *', timeZone: UTC },
      t('14:00'),
      t('13:55'),
      t('13:00'),
    );
    assert.deepEqual(rules, [{ schedule: '*/2 * * * *', timeZone: UTC }]);
  });

  it('judges nothing before the oldest rule kept when a rolling deploy flips two rules past MAX_RULES', () => {
    const every2 = { schedule: '*/2 * * * *', timeZone: UTC };
    const every1 = { schedule: '* * * * *', timeZone: UTC };
    const deploy = t('12:00');
    const retained = deploy - 86_400_000;
    // The cursor was written under `*/2` for hours; then checks alternate revisions every 5 min.
    let rules = nextRules(
      [],
      every2,
      deploy - 3 * 3_600_000,
      deploy - 3 * 3_600_000,
      retained,
    );
    let last = deploy - 3 * 3_600_000;
    for (let k = 0; k < 10; k++) {
      const now = deploy + k * 5 * 60_000;
      rules = nextRules(
        rules,
        k % 2 === 0 ? every1 : every2,
        now,
        last,
        retained,
      );
      last = now;
    }
    assert.equal(rules.length, MAX_RULES);
    // `*/2` was the only rule before the deploy: an odd minute then was never a slot.
    assert.equal(isJudgedSlot(rules, new Date(t('11:01'))), false);
    const { slots } = judgedSlots(
      rules,
      new Date(t('10:00')),
      new Date(t('10:10')),
      100,
    );
    assert.deepEqual(slots, []);
    // From the oldest rule kept on, slots are judged as before (only those both rules schedule).
    const kept = rules[0]?.since ?? 0;
    assert.ok(kept > deploy);
    const after = judgedSlots(
      rules,
      new Date(kept),
      new Date(kept + 10 * 60_000),
      100,
    ).slots;
    assert.ok(after.length > 0);
    assert.ok(after.every((d) => d.getUTCMinutes() % 2 === 0));
  });
});

describe('readRules: the rules a cursor stores, as checks write them', () => {
  const UTC = 'Etc/UTC';
  const t = (hhmm: string) => Date.parse(`2026-10-16T${hhmm}:00Z`);
  const at = (hhmm: string, seconds = 0) =>
    Timestamp.fromMillis(t(hhmm) + seconds * 1000);
  const job = { schedule: '*/5 * * * *', timeZone: UTC };
  const hourly = { schedule: '0 * * * *', time_zone: UTC };
  const fives = { schedule: '*/5 * * * *', time_zone: UTC };
  const now = t('13:00');

  it("takes an earlier version's cursor without rules for the declared rule, sighted by no check (stop 74)", () => {
    const rules = readRules(undefined, job, now);

    assert.deepEqual(rules, [{ schedule: job.schedule, timeZone: UTC }]);
    assert.equal(isSighted(rules as JudgedRule[]), false);
    const written = readRules(
      [{ ...fives, first_seen: at('11:00') }],
      job,
      now,
    );
    assert.equal(isSighted(written as JudgedRule[]), true);
  });

  it('reads a schedule change as a check writes it, and times within the clock slack', () => {
    const rules = readRules(
      [
        { ...hourly, first_seen: at('11:00'), until: at('12:05') },
        { ...fives, since: at('12:05', -5) },
      ],
      job,
      now,
    );
    assert.deepEqual(rules, [
      {
        ...job,
        schedule: '0 * * * *',
        firstSeen: t('11:00'),
        until: t('12:05'),
      },
      { ...job, since: t('12:05') - 5_000 },
    ]);
    assert.deepEqual(
      readRules([{ ...fives, since: at('13:00', 5) }], job, now),
      [{ ...job, since: t('13:00') + 5_000 }],
    );
  });

  it("refuses a time ahead of Firestore's now: the rule would judge nothing until then (an attack, stop 71)", () => {
    const changedAhead = [
      { ...hourly, until: at('12:05') },
      { ...fives, since: Timestamp.fromMillis(now + 30 * 86_400_000) },
    ];
    const ahead = "has a time ahead of Firestore's now";
    assert.deepEqual(readRules(changedAhead, job, now), {
      unreadable: `rules[1] ${ahead}`,
    });
    assert.deepEqual(readRules([{ ...fives, since: at('13:01') }], job, now), {
      unreadable: `rules[0] ${ahead}`,
    });
    assert.deepEqual(
      readRules([{ ...fives, first_seen: at('14:00') }], job, now),
      { unreadable: `rules[0] ${ahead}` },
    );
  });

  it('refuses times out of the order checks write them', () => {
    assert.deepEqual(
      readRules(
        [{ ...hourly, since: at('12:30'), until: at('12:00') }, fives],
        job,
        now,
      ),
      { unreadable: 'rules[0] has a since after its until' },
    );
    assert.deepEqual(
      readRules(
        [
          { ...hourly, until: at('12:30') },
          { ...fives, since: at('12:00') },
        ],
        job,
        now,
      ),
      { unreadable: 'rules[1] has a since before the rule before it ended' },
    );
  });
});

describe('readCursor: a cursor this version never writes is refused with what is wrong in it', () => {
  const now = new Date('2026-10-16T13:00:00Z');
  const ts = (ms: number) => Timestamp.fromMillis(ms);
  const job = five as DeclaredJob;
  const closedAfter = closedAfterMs(job);
  /** A cursor as a check writes it at `now`, for `five`. */
  const written = {
    checked_before: ts(now.getTime() - closedAfter - 60_000),
    run_seen: false,
    seen_at: ts(now.getTime()),
    closed_after_ms: closedAfter,
    rules: [{ schedule: job.schedule, time_zone: job.timeZone }],
  };
  const read = (change: Record<string, unknown>, updateTime?: Timestamp) =>
    readCursor({ ...written, ...change }, updateTime, job, now);

  it("reads the cursor a check writes, and an earlier version's by its write time", () => {
    assert.deepEqual(read({}), {
      checkedBefore: written.checked_before.toDate(),
      runSeen: false,
      rules: [{ schedule: job.schedule, timeZone: job.timeZone }],
      seenAt: now.getTime(),
    });
    const earlier = read({ seen_at: undefined }, ts(now.getTime() - 5_000));
    assert.equal(isUnreadable(earlier), false);
    assert.equal((earlier as Cursor).seenAt, now.getTime() - 5_000);
  });

  it('names the field: its type, a seen_at ahead of now or null, a cursor ahead of the boundary, its rules', () => {
    const reason = (change: Record<string, unknown>) =>
      (read(change) as { unreadable?: string }).unreadable;
    assert.equal(
      reason({ checked_before: 'yesterday' }),
      'checked_before is not a timestamp',
    );
    assert.equal(reason({ run_seen: 'true' }), 'run_seen is not true or false');
    assert.equal(reason({ seen_at: null }), 'seen_at is not a timestamp');
    assert.equal(
      reason({ seen_at: ts(now.getTime() + 86_400_000) }),
      "seen_at is ahead of Firestore's now",
    );
    assert.equal(
      reason({ seen_at: ts(now.getTime() + 5_000) }),
      undefined,
      'within the clock slack',
    );
    assert.equal(
      reason({ closed_after_ms: null }),
      'closed_after_ms is not a whole number of ms of at least 15000 (the shortest attempt deadline)',
    );
    assert.equal(
      reason({ closed_after_ms: 0.5 }),
      'closed_after_ms is not a whole number of ms of at least 15000 (the shortest attempt deadline)',
    );
    assert.match(
      reason({ checked_before: ts(now.getTime()) }) ?? '',
      /^checked_before is ahead of the job's closed boundary/,
    );
    assert.equal(
      reason({ rules: [] }),
      `rules is not a list of 1 to ${MAX_RULES} rules`,
    );
  });

  it('tells a cursor of a shorter retry window, which reads again by itself, from one written ahead by hand (the attack of stop 72)', () => {
    const boundary = now.getTime() - closedAfter;
    // Written a minute ago by a version whose window was 10 minutes shorter, at its own boundary.
    const writer = closedAfter - 600_000;
    const written = {
      checked_before: ts(now.getTime() - 60_000 - writer),
      seen_at: ts(now.getTime() - 60_000),
    };
    const shorter = read({ ...written, closed_after_ms: writer }) as Unreadable;
    assert.match(shorter.unreadable, /written under a shorter retry window/);
    assert.equal(
      shorter.readsAgainAt,
      now.getTime() - 60_000 - writer + closedAfter - 10_000,
    );
    assert.ok((shorter.readsAgainAt ?? 0) > boundary);
    // The same times under this job's own window: no writer's window explains them.
    const byHand = read(written) as Unreadable;
    assert.match(
      byHand.unreadable,
      /further than its writer's retry window explains/,
    );
    assert.equal(byHand.readsAgainAt, undefined);
  });

  it("still refuses a cursor written past its writer's own boundary once the job's boundary has passed it (stop 74's aheadCursorReadsLater)", () => {
    const hour = 3_600_000;
    // Written two hours ago, an hour past its writer's boundary then: behind the job's boundary now.
    const twoHoursAgo = now.getTime() - 2 * hour;
    const byHand = {
      checked_before: ts(twoHoursAgo - closedAfter + hour),
      seen_at: ts(twoHoursAgo),
    };
    const refused = read(byHand) as Unreadable;
    assert.match(
      refused.unreadable,
      /^checked_before was ahead of its writer's own boundary when it was written/,
    );
    assert.equal(refused.readsAgainAt, undefined);
    // Up to the clock slack past it, a check's own write: read.
    const atSlack = read({
      ...byHand,
      checked_before: ts(twoHoursAgo - closedAfter + 10_000),
    });
    assert.equal(isUnreadable(atSlack), false);
    // A seen_at without closed_after_ms (no version wrote one) is judged by the job's window.
    assert.match(
      (read({ ...byHand, closed_after_ms: undefined }) as Unreadable)
        .unreadable,
      /^checked_before was ahead of its writer's own boundary/,
    );
    // An earlier version's cursor has neither: dated by its update time, judged against the
    // job's boundary alone.
    const earlier = read(
      { ...byHand, closed_after_ms: undefined, seen_at: undefined },
      ts(twoHoursAgo),
    );
    assert.equal(isUnreadable(earlier), false);
  });

  it('refuses a closed_after_ms shorter than any job has (one attempt deadline, 15 s): it would pass a cursor ahead of the boundary for a shorter window’s (the attack of stop 75)', () => {
    const ahead = {
      checked_before: ts(now.getTime() + 5_000),
      seen_at: ts(now.getTime()),
    };
    assert.match(
      (read({ ...ahead, closed_after_ms: 1 }) as Unreadable).unreadable,
      /^closed_after_ms is not a whole number of ms of at least 15000/,
    );
    assert.match(
      (read({ ...ahead, closed_after_ms: 14_999 }) as Unreadable).unreadable,
      /^closed_after_ms/,
    );
    // At 15 s it names its writer's window, a shorter one: it reads again by itself.
    const shortest = read({
      ...ahead,
      checked_before: ts(now.getTime() - 15_000),
      closed_after_ms: 15_000,
    }) as Unreadable;
    assert.match(shortest.unreadable, /written under a shorter retry window/);
  });
});

describe('the rules a check that has seen no run learns from the claims (a schedule changed before any check saw it)', () => {
  const UTC = 'Etc/UTC';
  const t = (hhmm: string) => Date.parse(`2026-10-16T${hhmm}:00Z`);
  const every5 = { schedule: '*/5 * * * *', timeZone: UTC };
  const every2 = { schedule: '*/2 * * * *', timeZone: UTC };
  const claim = (rule: typeof every5, hhmm: string) => ({
    ...rule,
    at: t(hhmm),
  });
  // The rules of a first check at 13:00, every two minutes: nothing seen before it.
  const firstCheck = [{ ...every2, firstSeen: t('13:00') }];

  it('learns nothing when every claim names a rule possibly in force at its slot, or none is read', () => {
    assert.equal(
      rulesFromClaims(firstCheck, every2, [], t('14:00')),
      undefined,
    );
    assert.equal(
      rulesFromClaims(
        firstCheck,
        every2,
        [claim(every2, '12:40'), claim(every2, '12:42')],
        t('14:00'),
      ),
      undefined,
    );
  });

  it('places the old rule up to its last claim and the declared one from its first sighting after it', () => {
    const rules = rulesFromClaims(
      firstCheck,
      every2,
      // Out of order, as read: time order decides.
      [
        claim(every2, '12:42'),
        claim(every5, '12:30'),
        claim(every5, '12:10'),
        claim(every2, '12:40'),
      ],
      t('14:00'),
    );
    // 12:40 is a slot of both: the `*/2` revision's claim of it tells which revision served, not
    // which schedule Scheduler had (the deploy window). 12:42 is `*/2`'s alone: Scheduler's proof.
    assert.deepEqual(rules, [
      { ...every5, firstSeen: t('12:10'), until: t('12:30') },
      { ...every2, since: t('12:42') },
    ]);
    const judged = judgedSlots(
      rules ?? [],
      new Date(t('12:00')),
      new Date(t('12:47')),
      100,
    ).slots;
    assert.deepEqual(
      judged.map((d) => d.toISOString().slice(11, 16)),
      [
        '12:00',
        '12:05',
        '12:10',
        '12:15',
        '12:20',
        '12:25',
        '12:30',
        '12:40',
        '12:42',
        '12:44',
        '12:46',
      ],
      'the old rule alone before 12:30, both between, the new one from 12:42',
    );
  });

  it("without a claim of the declared rule after the old one's, places it from the first check's sighting", () => {
    assert.deepEqual(
      rulesFromClaims(firstCheck, every2, [claim(every5, '12:30')], t('14:00')),
      [
        { ...every5, firstSeen: t('12:30'), until: t('12:30') },
        { ...every2, since: t('13:00') },
      ],
    );
  });

  it('merges the claims with the sightings of a rolling deploy that flipped two rules before a run was seen', () => {
    // Checks saw `*/2` at 13:00, `*/5` at 13:01 (an old instance), `*/2` again now; a claim of
    // `*/5` at 12:55 was read: `*/2` was not in force since the job's first record.
    const flipped = [
      { ...every2, firstSeen: t('13:00'), until: t('13:00') },
      { ...every5, since: t('13:01'), until: t('13:01') },
      { ...every2, since: t('13:05') },
    ];
    assert.deepEqual(
      rulesFromClaims(flipped, every2, [claim(every5, '12:55')], t('13:05')),
      [
        { ...every5, firstSeen: t('12:55'), until: t('12:55') },
        { ...every2, since: t('13:00'), until: t('13:00') },
        { ...every5, since: t('13:01'), until: t('13:01') },
        { ...every2, since: t('13:05') },
      ],
    );
    assert.equal(
      rulesFromClaims(flipped, every2, [claim(every5, '13:01')], t('13:05')),
      undefined,
      '`*/5` was possibly in force then',
    );
  });

  it('keeps each change in time order, a rule back in force included, at most MAX_RULES', () => {
    const odd = { schedule: '1-59/2 * * * *', timeZone: UTC };
    assert.deepEqual(
      rulesFromClaims(
        firstCheck,
        every2,
        [
          claim(every2, '10:00'),
          claim(odd, '11:01'),
          claim(every5, '11:30'),
          claim(every2, '12:02'),
        ],
        t('14:00'),
      ),
      [
        { ...every2, firstSeen: t('10:00'), until: t('10:00') },
        { ...odd, since: t('11:01'), until: t('11:01') },
        { ...every5, since: t('11:30'), until: t('11:30') },
        { ...every2, since: t('12:02') },
      ],
    );
    const flips = Array.from({ length: 2 * MAX_RULES }, (_, i) =>
      claim(i % 2 === 0 ? every2 : odd, `10:${String(i).padStart(2, '0')}`),
    );
    const kept = rulesFromClaims(firstCheck, every2, flips, t('14:00')) ?? [];
    assert.equal(kept.length, MAX_RULES);
    assert.deepEqual(kept.at(-1), { ...every2, since: t('13:00') });
    assert.notEqual(
      kept[0]?.since,
      undefined,
      'the oldest kept judges nothing before its first sighting',
    );
  });

  it("takes no claim of a slot the rule in force has too for the new rule's sighting: the deploy window", () => {
    // deploy.sh deploys the function (every minute) at 12:29, then updates Scheduler at 12:31:
    // the new revision claims Scheduler's 12:30, a slot of `*/5`, and stamps `* * * * *`.
    const everyMinute = { schedule: '* * * * *', timeZone: UTC };
    const declared = [{ ...everyMinute, firstSeen: t('13:00') }];
    const rules = rulesFromClaims(
      declared,
      everyMinute,
      [
        claim(every5, '12:20'),
        claim(every5, '12:25'),
        claim(everyMinute, '12:30'),
        claim(everyMinute, '12:32'),
      ],
      t('14:00'),
    );
    assert.deepEqual(rules, [
      { ...every5, firstSeen: t('12:20'), until: t('12:25') },
      { ...everyMinute, since: t('12:32') },
    ]);
    const judged = (hhmm: string) =>
      judgedSlots(rules ?? [], new Date(t(hhmm)), new Date(t(hhmm) + 1), 1)
        .slots.length === 1;
    assert.equal(judged('12:31'), false, 'Scheduler never had 12:31');
    assert.equal(judged('12:30'), true);
  });

  it('takes no sighting a cursor dates after now (a hand edit)', () => {
    const ahead = [{ ...every2, firstSeen: t('23:00') }];
    const rules = rulesFromClaims(
      ahead,
      every2,
      [claim(every5, '12:30')],
      t('14:00'),
    );
    assert.deepEqual(rules, [
      { ...every5, firstSeen: t('12:30'), until: t('12:30') },
      { ...every2, since: t('14:00') },
    ]);
  });

  it("ignores a stamp no declaration accepts (another version's, a hand's)", () => {
    const forged = [
      { schedule: 'every minute', timeZone: UTC, at: t('12:10') },
      { schedule: '*/5 * * * *', timeZone: 'Mars/Olympus', at: t('12:20') },
    ];
    assert.equal(
      rulesFromClaims(firstCheck, every2, forged, t('14:00')),
      undefined,
    );
  });

  it("stamps Scheduler's on-time delivery of a slot only: never a backfill, a catch-up or a Force run", () => {
    const [job] = validateJobs([
      defineJob({ id: 'j', schedule: '*/2 * * * *', run: () => {} }),
    ]);
    const scheduleTime = '2026-10-16T12:30:00Z';
    const run = {
      jobNameSent: 'j',
      scheduleTime,
      scheduledAt: new Date(scheduleTime),
      scope: [],
    };
    const now = new Date(t('12:30'));
    const stamp = (more: object) =>
      planRun({ ...run, ...more }, job as never, now, 0).details.claimedUnder;
    assert.deepEqual(stamp({}), every2);
    assert.equal(stamp({ backfill: true }), undefined);
    assert.equal(stamp({ caughtUp: true }), undefined);
    assert.equal(stamp({ withoutScheduleTime: true }), undefined);
  });

  it("stamps the rule on a slot's first claim only: a takeover keeps the first claim's", () => {
    const details: RunDetails = { jobName: 'j', claimedUnder: every2 };
    const expireAt = Timestamp.fromMillis(t('23:00'));
    const first = claimFields('a1', 60_000, expireAt, details, undefined);
    assert.deepEqual([first.schedule, first.time_zone], ['*/2 * * * *', UTC]);
    const previous = {
      attempts: 1,
      firstClaimedAt: new Date(t('12:00')),
    } as RunRecord;
    const takeover = claimFields('a2', 60_000, expireAt, details, previous);
    assert.equal('schedule' in takeover || 'time_zone' in takeover, false);
  });
});

describe('slotVerdict of a failed slot whose first claim may be a Force run’s retry (issue 40: seed 7, history 316)', () => {
  // A broken job Scheduler retries for 300 s (an execution lasts up to 315 s: its last retry sent
  // just inside the 300 s, then its 15 s deadline). A Force run's retry 2.3 s after the slot made
  // the slot run's first claim, while Scheduler's own execution of the slot waited behind the
  // previous slot's, which could last until 240 s after this slot.
  const [broken] = validateJobs([
    defineJob({
      id: 'broken',
      schedule: '* * * * *',
      retryCount: 0,
      maxRetryDurationSeconds: 300,
      minBackoffSeconds: 1,
      maxBackoffSeconds: 20,
      maxDoublings: 0,
      attemptDeadlineSeconds: 15,
      run: () => {},
    }),
  ]);
  const job = broken as never;
  const slot = new Date(Date.parse('2026-10-16T12:00:00Z'));
  const after = (seconds: number) => new Date(slot.getTime() + seconds * 1000);
  const failed = {
    status: 'failed',
    kind: 'slot',
    attempts: 14,
    firstClaimedAt: after(2.3),
    failedAt: after(300),
    reportedAt: undefined,
  } as unknown as StoredRecord;
  const executionSeconds = longestExecutionMs(job) / 1000;
  const previousEnd = after(240).getTime();

  it('judges it from its first claim when the previous execution ended before the slot', () => {
    const closes = 2.3 + executionSeconds + 15;

    assert.equal(executionSeconds, 315);
    assert.equal(
      slotVerdict(job, slot, failed, after(-1).getTime(), after(closes + 1))
        .verdict,
      'failed',
    );
  });

  it('keeps it open until an execution after the previous execution’s latest end when that is later', () => {
    const closes = 240 + executionSeconds + 15;

    assert.equal(
      slotVerdict(
        job,
        slot,
        failed,
        previousEnd,
        after(2.3 + executionSeconds + 16),
      ).verdict,
      'open',
    );
    assert.equal(
      slotVerdict(job, slot, failed, previousEnd, after(closes - 1)).verdict,
      'open',
    );
    assert.equal(
      slotVerdict(job, slot, failed, previousEnd, after(closes + 1)).verdict,
      'failed',
    );
  });
});

describe('slotVerdict of a slot Scheduler dispatched behind a long execution (issue 40: seed 8, history 97)', () => {
  // Scheduler retries for 300 s whatever the count; the attempts that failed fast (Firestore
  // unreachable, 10 s) left room for a sixth attempt 299.5 s after the first, which the retry
  // window (every attempt to its 49 s deadline: 259 s) does not count.
  const [slow] = validateJobs([
    defineJob({
      id: 'slow',
      schedule: '*/2 * * * *',
      retryCount: 0,
      maxRetryDurationSeconds: 300,
      minBackoffSeconds: 9,
      maxBackoffSeconds: 60,
      maxDoublings: 2,
      attemptDeadlineSeconds: 49,
      run: () => {},
    }),
  ]);
  const job = slow as never;
  const slot = new Date(Date.parse('2026-01-05T01:08:00Z'));
  const after = (seconds: number) => new Date(slot.getTime() + seconds * 1000);
  const firstAttempt = 320.8; // behind the previous slot's execution
  const failed = {
    status: 'failed',
    kind: 'slot',
    attempts: 2,
    firstClaimedAt: after(firstAttempt),
    failedAt: after(560.3),
    reportedAt: undefined,
  } as unknown as StoredRecord;

  it('stays open while its last retry may still come and run', () => {
    const lastRetrySent = firstAttempt + 299.5;
    const verdictAt = (seconds: number) =>
      slotVerdict(
        job,
        slot,
        failed,
        after(firstAttempt).getTime(),
        after(seconds),
      ).verdict;

    assert.equal(verdictAt(lastRetrySent - 20), 'open');
    assert.equal(verdictAt(lastRetrySent + 49), 'open');
    assert.equal(verdictAt(firstAttempt + 300 + 49 + 49 + 1), 'failed');
  });
});

describe('reportedState: what a report logged again says', () => {
  const at = (iso: string) => new Date(iso);
  const reportedAt = at('2026-01-05T02:00:00Z');

  it('says failed for a run an attempt had claimed before the report, whatever its status now', () => {
    for (const status of ['failed', 'in_progress', 'completed'] as const) {
      assert.equal(
        reportedState({
          status,
          firstClaimedAt: at('2026-01-05T01:00:00Z'),
          reportedAt,
        }),
        'failed',
        status,
      );
    }
  });

  it('says missed for a run first claimed after the report (a backfill re-opened it)', () => {
    assert.equal(
      reportedState({
        status: 'in_progress',
        firstClaimedAt: at('2026-01-05T03:00:00Z'),
        reportedAt,
      }),
      'missed',
    );
    assert.equal(
      reportedState({
        status: 'missed',
        firstClaimedAt: undefined,
        reportedAt,
      }),
      'missed',
    );
  });

  it('keeps a failure report failed once a claim re-opened a record of an earlier version, which wrote no first claim', () => {
    const t = (iso: string) => Timestamp.fromDate(at(iso));
    const read = (data: Record<string, unknown>) =>
      runRecordConverter.fromFirestore({
        data: () => data,
      } as unknown as QueryDocumentSnapshot) as RunRecord;
    const before = {
      status: 'failed',
      attempt_id: 'old',
      attempts: 3,
      claimed_at: t('2026-01-05T01:00:00Z'),
      failed_at: t('2026-01-05T01:50:00Z'),
      reported_at: t('2026-01-05T02:00:00Z'),
      reported_by: 'check',
    };
    const claim = claimFields(
      'backfill',
      30_000,
      t('2026-01-06T00:00:00Z'),
      {
        jobName: 'j',
        scheduleTime: '2026-01-05T00:00:00Z',
      } satisfies RunDetails,
      read(before),
    );
    const reopened: Record<string, unknown> = { ...before };
    for (const [field, value] of Object.entries(claim)) {
      reopened[field] =
        value instanceof FieldValue ? t('2026-01-05T03:00:00Z') : value;
    }

    assert.equal(read(reopened).status, 'in_progress');
    assert.equal(reportedState(read(reopened)), 'failed');
  });

  it('takes a record of an earlier version, with no first claim, at its status', () => {
    assert.equal(
      reportedState({
        status: 'failed',
        firstClaimedAt: undefined,
        reportedAt,
      }),
      'failed',
    );
  });
});

describe('a cursor another check wrote while this check read it (the attack of stop 72)', () => {
  const T = Date.parse('2026-03-02T10:00:30Z');
  const job = five as DeclaredJob;
  /** What another instance's check wrote at T + 11 s: a real cursor, stopped at an open slot. */
  const othersWrite = T + 11_000;
  const written = cursorDocument(
    job,
    {
      checkedBefore: new Date(othersWrite - closedAfterMs(job) - 600_000),
      runSeen: true,
      rules: [{ ...ruleOf(job), firstSeen: T - 86_400_000 }],
      seenAt: othersWrite,
    },
    Timestamp.fromMillis(othersWrite + 86_400_000),
  );

  /**
   * One check at `T` over a store whose read of the cursor answers `data` at `readTime`: what it
   * logged, what it wrote and what it returned.
   */
  async function checkOver(data: DocumentData, readTime: number) {
    const logged: { level: string; message: unknown; fields: unknown }[] = [];
    const writes: unknown[] = [];
    const log =
      (level: string) =>
      (fields: unknown, message?: unknown): void => {
        logged.push({ level, message, fields });
      };
    const logger: Logger = {
      debug() {},
      info() {},
      warn: log('WARNING'),
      error: log('ERROR'),
      child: () => logger,
    };
    const jobDocuments = {
      readData: async () => ({
        data,
        updateTime: Timestamp.fromMillis(othersWrite),
        readTime: new Date(readTime),
      }),
      write: async (...args: unknown[]) => {
        writes.push(args);
        return Timestamp.fromMillis(readTime + 100);
      },
      expireAt: () => Timestamp.fromMillis(T + 86_400_000),
      retentionMs: 30 * 86_400_000,
    } as unknown as RunDocuments;
    const history = {
      getMany: async (ids: readonly string[]) => ({
        records: new Map(ids.map((runId) => [runId, undefined])),
        updateTimes: new Map(),
        readTime: new Date(readTime),
      }),
    };
    const check = new MissedRunCheck({
      history: history as never,
      jobDocuments,
      clock: async () => new Date(T),
    });
    const result = await check.check(job, [], logger);
    return { logged, writes, result };
  }

  it('leaves the slots to the check that wrote it: no ERROR, no write (a write from the older clock would put a rule out of order)', async () => {
    // The read is slow: it answers at T + 12 s, after the other check's write.
    const { logged, writes, result } = await checkOver(written, T + 12_000);

    assert.deepEqual(logged, [], 'a cursor a check wrote was said unreadable');
    assert.equal(result.checked, 0, 'the other check judged its slots');
    assert.deepEqual(writes, [], 'nothing written from the older clock');
  });

  it('says a cursor of a shorter retry window in a WARNING with when it reads again, not in an ERROR', async () => {
    // Written a minute ago by a revision whose window was 10 minutes shorter, at its boundary.
    const writer = closedAfterMs(job) - 600_000;
    const shorter = {
      ...written,
      checked_before: Timestamp.fromMillis(T - 60_000 - writer),
      seen_at: Timestamp.fromMillis(T - 60_000),
      closed_after_ms: writer,
    };

    const { logged, writes } = await checkOver(shorter, T);

    assert.deepEqual(
      logged.map(({ level, message }) => [level, message]),
      [['WARNING', CURSOR_OF_SHORTER_WINDOW]],
    );
    const readsAgainAt = T - 60_000 - writer + closedAfterMs(job) - 10_000;
    assert.equal(
      (logged[0]?.fields as { readsAgainAt?: string } | undefined)
        ?.readsAgainAt,
      new Date(readsAgainAt).toISOString(),
    );
    assert.deepEqual(writes, []);
  });

  it('runs --check judges the cursor at the read too, whatever --now says: a past --now keeps the rules it recorded', () => {
    const read = {
      data: {
        ...written,
        rules: [
          {
            schedule: '0 9 * * 1',
            time_zone: 'Etc/UTC',
            until: Timestamp.fromMillis(T - 86_400_000),
          },
          {
            schedule: job.schedule,
            time_zone: job.timeZone,
            since: Timestamp.fromMillis(T - 86_400_000),
          },
        ],
      },
      updateTime: Timestamp.fromMillis(othersWrite),
      readTime: new Date(T + 12_000),
    };
    const pastNow = new Date(T - 3_600_000);

    const rules = rulesInForce(read, job, pastNow);

    assert.deepEqual(
      rules.map((rule) => rule.schedule),
      ['0 9 * * 1', job.schedule],
      'the rule before the change is kept, though the cursor was written after --now',
    );
  });
});
