/**
 * Histories the simulator found, shrunk by fast-check, kept as regression tests. `REGRESSIONS`:
 * each names the known gap ({@link KNOWN_GAPS}) it shows and the violation it gives while the gap
 * is open; once the gap's fix lands, its history keeps every invariant: remove the gap's switch and
 * move the history to `FIXED`.
 */
import type { Awaiting } from './invariants.ts';
import type { GapName, History, JobSpec } from './model.ts';

const job = (id: string, overlap: JobSpec['overlap']): JobSpec => ({
  id,
  schedule: '* * * * *',
  overlap,
  attemptDeadlineSeconds: 15,
  retryCount: 0,
  maxRetryDurationSeconds: 0,
  minBackoffSeconds: 1,
  maxBackoffSeconds: 20,
  maxDoublings: 0,
  minMs: 100,
  maxMs: 20_000,
  failRate: 0,
});

const quiet = {
  duplicates: 0,
  dropAnswers: 0,
  latency: [1, 5] as const,
  faultRate: 0,
  clockOffsetMs: 0,
};

/** One regression: the gap it shows, its history, and the violation while the gap is open. */
export interface Regression {
  readonly gap: GapName;
  readonly finding: string;
  readonly history: History;
  readonly violation: RegExp;
}

export const REGRESSIONS: readonly Regression[] = [
  {
    gap: 'auditBeforeFirstRecord',
    finding:
      "issue 42's audit: its missed-run check judges a job's first slots before the job's first claim lands (the instance paused with the slot's delivery and the audit's), takes them for slots before the job existed, and never reports the one after (found by `npm run simulate -- --histories 60 --seed 1`, the 41st, not shrunk)",
    history: {
      seed: -7,
      leaseSeconds: 24,
      scopes: [''],
      instances: 1,
      spanMs: 960000,
      duplicates: 0.3,
      dropAnswers: 0.3,
      latency: [20, 400],
      faultRate: 0.01,
      lateAnswers: 0,
      crashAfterWrite: 0,
      firestoreTimeoutSeconds: 2,
      clockOffsetMs: -136679,
      audit: true,
      jobs: [
        {
          id: 'job-0',
          schedule: '*/2 * * * *',
          overlap: 'wait',
          attemptDeadlineSeconds: 16,
          retryCount: 0,
          maxRetryDurationSeconds: 0,
          minBackoffSeconds: 6,
          maxBackoffSeconds: 60,
          maxDoublings: 2,
          minMs: 12563,
          maxMs: 120567,
          failRate: 0.1,
          notes: false,
          catchUp: {
            graceSeconds: 180,
            windowSeconds: 180,
            slots: 'latest',
          },
        },
        {
          id: 'job-1',
          schedule: '*/2 * * * *',
          overlap: 'skip',
          attemptDeadlineSeconds: 90,
          retryCount: 0,
          maxRetryDurationSeconds: 0,
          minBackoffSeconds: 5,
          maxBackoffSeconds: 20,
          maxDoublings: 1,
          minMs: 5000,
          maxMs: 10000,
          failRate: 1,
          notes: false,
          catchUp: {
            graceSeconds: 30,
            windowSeconds: 60,
            slots: 'latest',
          },
        },
        {
          id: 'job-2',
          schedule: '* * * * *',
          overlap: 'wait',
          attemptDeadlineSeconds: 84,
          retryCount: 1,
          maxRetryDurationSeconds: 300,
          minBackoffSeconds: 20,
          maxBackoffSeconds: 20,
          maxDoublings: 2,
          minMs: 14134,
          maxMs: 129330,
          failRate: 0.3,
          notes: true,
        },
      ],
      events: [
        {
          at: 41975,
          type: 'repair',
          deployment: 0,
          job: 2,
        },
        {
          at: 73407,
          type: 'pause',
          deployment: 0,
          instance: 0,
          ms: 199990,
        },
        {
          at: 108373,
          type: 'rerun',
          deployment: 0,
          job: 2,
        },
      ],
    },
    violation: /slot job-0@\S+ was lost silently/,
  },
  {
    gap: 'lateDispatch',
    finding:
      "issue 42's model of Scheduler's late dispatch: a slot dispatched 112 s late is first attempted after the check reported it failed, the check allowing a late first claim only one retry window after the slot (found by `npm run simulate -- --histories 1000 --seed 7 --gap lateDispatch`, the 60th, shrunk by hand; the earlier history, of seed 2, no longer shows it since the check starts a slot's execution no earlier than the previous one's latest end, issue 40)",
    history: {
      seed: 1007916338,
      leaseSeconds: 118,
      scopes: [''],
      instances: 3,
      spanMs: 1560000,
      duplicates: 0,
      dropAnswers: 0,
      latency: [1, 5],
      faultRate: 0,
      lateAnswers: 0.05,
      crashAfterWrite: 0.05,
      firestoreTimeoutSeconds: 10,
      clockOffsetMs: 0,
      audit: true,
      jobs: [
        {
          id: 'job-0',
          schedule: '*/2 * * * *',
          overlap: 'allow',
          attemptDeadlineSeconds: 18,
          retryCount: 0,
          maxRetryDurationSeconds: 0,
          minBackoffSeconds: 1,
          maxBackoffSeconds: 20,
          maxDoublings: 2,
          minMs: 5026,
          maxMs: 113484,
          failRate: 0.1,
          notes: false,
          catchUp: {
            graceSeconds: 30,
            windowSeconds: 330,
            slots: 'all',
          },
        },
      ],
      events: [
        {
          at: 122535,
          type: 'force',
          deployment: 0,
          job: 0,
          withoutScheduleTime: false,
          nearSlot: true,
        },
        {
          at: 174457,
          type: 'late_delivery',
          deployment: 0,
          job: 0,
          ms: 112416,
          nearAudit: true,
        },
        {
          at: 186981,
          type: 'sigterm',
          deployment: 0,
          instance: 1,
        },
        {
          at: 220414,
          type: 'pause',
          deployment: 0,
          instance: 1,
          ms: 167173,
        },
      ],
    },
    violation:
      /reported "run failed after retries" .* but Cloud Scheduler still sent attempt/,
  },
];

/**
 * Histories the simulator found, each a bug fixed since: they keep every invariant. The first six
 * showed issue 25's findings while their gaps were open (the overlap lock and the key scope, a
 * Force run beside a `wait` job's slot, a resent trigger id, a clock step, a crash under `skip`).
 */
export const FIXED: readonly {
  readonly finding: string;
  readonly history: History;
}[] = [
  {
    finding: 'issue 25 finding 1: the overlap lock ignores the key scope',
    history: {
      seed: 20,
      leaseSeconds: 89,
      scopes: ['staging', 'production'],
      instances: 2,
      spanMs: 513_663,
      ...quiet,
      latency: [20, 400],
      faultRate: 0.01,
      clockOffsetMs: 174_480,
      jobs: [job('job-0', 'allow'), job('job-1', 'skip')],
      events: [],
    },
  },
  {
    finding:
      'issue 25 finding 5: a Force run runs beside the slot of a `wait` job',
    history: {
      seed: 0,
      leaseSeconds: 20,
      scopes: [''],
      instances: 1,
      spanMs: 368_509,
      ...quiet,
      jobs: [job('job-0', 'allow'), job('job-1', 'wait')],
      events: [{ at: 240_000, type: 'force', deployment: 0, job: 1 }],
    },
  },
  {
    finding:
      'issue 25 finding 5: a manual run and a Force run at once on a `wait` job',
    history: {
      seed: 0,
      leaseSeconds: 20,
      scopes: [''],
      instances: 1,
      spanMs: 180_000,
      ...quiet,
      jobs: [job('job-0', 'wait')],
      events: [
        { at: 0, type: 'manual', deployment: 0, job: 0, resend: false },
        { at: 0, type: 'force', deployment: 0, job: 0 },
      ],
    },
  },
  {
    finding:
      'issue 25 finding 4: one trigger id sent again a second later runs twice',
    history: {
      seed: 9,
      leaseSeconds: 25,
      scopes: ['staging', 'production'],
      instances: 1,
      spanMs: 195_657,
      ...quiet,
      duplicates: 0.3,
      dropAnswers: 0.3,
      latency: [5, 50],
      clockOffsetMs: -538_996,
      jobs: [job('job-0', 'allow')],
      events: [
        { at: 0, type: 'manual', deployment: 1, job: 0, resend: false },
        { at: 1000, type: 'manual', deployment: 1, job: 0, resend: true },
      ],
    },
  },
  {
    finding:
      'issue 25 finding 2: a warm instance whose wall clock steps back 30 s judges an on-time slot a forced run',
    history: {
      seed: 960_507_525,
      leaseSeconds: 22,
      scopes: ['staging', 'production'],
      instances: 2,
      spanMs: 312_357,
      ...quiet,
      duplicates: 0.3,
      latency: [5, 50],
      clockOffsetMs: -311_767,
      jobs: [
        job('job-0', 'allow'),
        { ...job('job-1', 'allow'), schedule: '*/5 * * * *' },
      ],
      events: [
        { at: 1, type: 'backfill', deployment: 0 },
        { at: 17_615, type: 'pause', deployment: 0, instance: 0, ms: 44_129 },
        { at: 61_830, type: 'step', deployment: 1, instance: 1, ms: -29_961 },
      ],
    },
  },
  {
    finding:
      "issue 25 finding 3: a SIGTERM'd holder's retry and the next slot of a `skip` job arrive together and both run",
    history: {
      seed: 57_295_286,
      leaseSeconds: 34,
      scopes: [''],
      instances: 1,
      spanMs: 385_889,
      ...quiet,
      duplicates: 0.1,
      dropAnswers: 0.3,
      clockOffsetMs: 304_859,
      jobs: [
        job('job-0', 'allow'),
        {
          ...job('job-1', 'skip'),
          maxRetryDurationSeconds: 60,
          minBackoffSeconds: 18,
        },
        job('job-2', 'allow'),
      ],
      events: [
        {
          at: 11_377,
          type: 'redeploy',
          deployment: 0,
          change: 'overlap_skip',
          rolling: true,
        },
        { at: 126_990, type: 'sigterm', deployment: 0, instance: 0 },
        { at: 131_335, type: 'pause', deployment: 0, instance: 0, ms: 48_661 },
      ],
    },
  },
  {
    // Found by `npm run simulate -- --histories 1000 --seed 8101` (history 114). The simulator's
    // fault: the job returned at the very instant its instance crashed, so its completion write was
    // never sent and Scheduler's retry ran it again, the at-least-once case downstream idempotency
    // keys exist for; the invariant excused a crash during the job but not one right after it.
    finding:
      'an instance crashed as its job returned, before the completion write: the retry ran it again',
    history: {
      seed: -1077375842,
      leaseSeconds: 23,
      scopes: [''],
      instances: 2,
      spanMs: 839995,
      duplicates: 0.3,
      dropAnswers: 0,
      latency: [20, 400],
      faultRate: 0.05,
      clockOffsetMs: -599993,
      jobs: [
        {
          id: 'job-0',
          schedule: '* * * * *',
          overlap: 'wait',
          attemptDeadlineSeconds: 59,
          retryCount: 0,
          maxRetryDurationSeconds: 300,
          minBackoffSeconds: 20,
          maxBackoffSeconds: 20,
          maxDoublings: 0,
          minMs: 15533,
          maxMs: 96901,
          failRate: 0,
        },
      ],
      events: [
        { at: 45175, type: 'force', deployment: 0, job: 0 },
        { at: 342690, type: 'sigterm', deployment: 0, instance: 1 },
        { at: 534743, type: 'crash', deployment: 0, instance: 0 },
      ],
    } as History,
  },
  {
    // Found by `npm run simulate -- --small --histories 4000 --seed 7771` (history 700). The
    // simulator's fault: the paused instance resumed 19 s before the final audit and ran the job's
    // 00:58 slot through it; the audit's check stopped at that open run, as a check must, and was
    // not run again. The final audit now waits for attempts from the last resumed pause as well.
    finding:
      "an instance paused 195 s across the span's end: the final audit ran while that instance's run was still open",
    history: {
      seed: 2147483638,
      leaseSeconds: 24,
      scopes: [''],
      instances: 2,
      spanMs: 120003,
      duplicates: 0,
      dropAnswers: 0,
      latency: [20, 400],
      faultRate: 0.01,
      clockOffsetMs: -549803,
      jobs: [job('job-0', 'allow'), job('job-1', 'allow')],
      events: [
        { at: 93638, type: 'pause', deployment: 0, instance: 1, ms: 195101 },
      ],
    } as History,
  },
  {
    finding:
      "a job running past its attempt deadline, SIGTERM'd: its own final-failure report, then Scheduler's retry (decided at the deadline) reported it again",
    history: {
      seed: 0,
      leaseSeconds: 20,
      scopes: [''],
      instances: 1,
      spanMs: 226684,
      duplicates: 0,
      dropAnswers: 0,
      latency: [1, 5],
      faultRate: 0,
      clockOffsetMs: 0,
      jobs: [
        job('job-0', 'allow'),
        {
          ...job('job-1', 'allow'),
          attemptDeadlineSeconds: 38,
          maxRetryDurationSeconds: 60,
          minBackoffSeconds: 11,
          maxMs: 72910,
        },
      ],
      events: [
        { at: 0, type: 'manual', deployment: 0, job: 1, resend: false },
        { at: 120014, type: 'rerun', deployment: 0, job: 0 },
        { at: 169017, type: 'sigterm', deployment: 0, instance: 0 },
      ],
    } as History,
  },
  {
    finding:
      'a delivery held by a paused instance past the window ran a slot already reported missed',
    history: {
      seed: -1530488871,
      leaseSeconds: 27,
      scopes: [''],
      instances: 2,
      spanMs: 252139,
      duplicates: 0.3,
      dropAnswers: 0,
      latency: [1, 5],
      faultRate: 0.01,
      clockOffsetMs: 316354,
      jobs: [job('job-0', 'allow'), job('job-1', 'allow')],
      events: [
        { at: 170209, type: 'pause', deployment: 0, instance: 1, ms: 69823 },
        { at: 180000, type: 'manual', deployment: 0, job: 0, resend: false },
      ],
    } as History,
  },
  {
    finding:
      'a claim whose answer a paused instance lost: the missed-run report lost to it and the cursor passed the slot, never reported',
    history: {
      seed: -1530488871,
      leaseSeconds: 27,
      scopes: [''],
      instances: 2,
      spanMs: 252139,
      duplicates: 0.3,
      dropAnswers: 0,
      latency: [1, 5],
      faultRate: 0.01,
      clockOffsetMs: 316354,
      jobs: [job('job-0', 'allow'), job('job-1', 'allow')],
      events: [
        { at: 180009, type: 'pause', deployment: 0, instance: 1, ms: 60013 },
      ],
    } as History,
  },
  {
    finding:
      "a paused attempt's completion adopted the update time of the report that its lease had lapsed, and completed a slot reported failed",
    history: {
      seed: -21,
      leaseSeconds: 99,
      scopes: ['staging', 'production'],
      instances: 2,
      spanMs: 255198,
      duplicates: 0,
      dropAnswers: 0,
      latency: [5, 50],
      faultRate: 0,
      clockOffsetMs: 260702,
      jobs: [{ ...job('job-0', 'allow'), minMs: 11642, maxMs: 44409 }],
      events: [
        { at: 129199, type: 'pause', deployment: 0, instance: 1, ms: 111054 },
      ],
    } as History,
  },
  {
    finding:
      "a SIGTERM during an instance's pause ended its job at once, while paused: the signal is handled when the instance resumes",
    history: {
      seed: -1730000951,
      leaseSeconds: 85,
      scopes: [''],
      instances: 3,
      spanMs: 610560,
      duplicates: 0,
      dropAnswers: 0,
      latency: [20, 400],
      faultRate: 0.01,
      clockOffsetMs: 312581,
      jobs: [
        job('job-0', 'allow'),
        { ...job('job-1', 'allow'), maxMs: 24857 },
        {
          ...job('job-2', 'allow'),
          maxRetryDurationSeconds: 300,
          maxMs: 66392,
        },
      ],
      events: [
        { at: 106529, type: 'rerun', deployment: 0, job: 2 },
        { at: 441748, type: 'pause', deployment: 0, instance: 2, ms: 73643 },
        { at: 506149, type: 'sigterm', deployment: 0, instance: 2 },
      ],
    } as History,
  },
  {
    finding:
      "a SIGTERM'd attempt's final failure: its release landed with the report, its answer came after SIGKILL, and the report was never logged",
    history: {
      seed: -1730000951,
      leaseSeconds: 85,
      scopes: [''],
      instances: 3,
      spanMs: 610560,
      duplicates: 0,
      dropAnswers: 0,
      latency: [20, 400],
      faultRate: 0.01,
      clockOffsetMs: 312581,
      jobs: [
        job('job-0', 'allow'),
        job('job-1', 'allow'),
        job('job-2', 'allow'),
      ],
      events: [
        { at: 60456, type: 'rerun', deployment: 0, job: 0 },
        { at: 486413, type: 'sigterm', deployment: 0, instance: 2 },
      ],
    } as History,
  },
  {
    finding:
      "a Force run taken for its slot, SIGTERM'd before the slot's time: its attempt reported the slot failed after retries, and Scheduler's own delivery of the slot then ran it",
    history: {
      seed: -1091561680,
      leaseSeconds: 24,
      scopes: [''],
      instances: 1,
      spanMs: 180003,
      duplicates: 0,
      dropAnswers: 0.3,
      latency: [20, 400],
      faultRate: 0.05,
      clockOffsetMs: 106468,
      jobs: [job('job-0', 'allow')],
      events: [
        { at: 29704, type: 'force', deployment: 0, job: 0 },
        { at: 30686, type: 'pause', deployment: 0, instance: 0, ms: 10000 },
        {
          at: 30686,
          type: 'redeploy',
          deployment: 0,
          change: 'overlap_allow',
          rolling: false,
        },
      ],
    } as History,
  },
  {
    finding:
      "a redeploy during an instance's pause: its SIGTERM ended the job while paused, and its final-failure report was logged beside the check's",
    history: {
      seed: 2147483618,
      leaseSeconds: 57,
      scopes: ['staging', 'production'],
      instances: 1,
      spanMs: 455800,
      ...quiet,
      clockOffsetMs: 507359,
      jobs: [
        job('job-0', 'allow'),
        job('job-1', 'allow'),
        job('job-2', 'allow'),
      ],
      events: [
        { at: 180008, type: 'pause', deployment: 0, instance: 0, ms: 10000 },
        {
          at: 180008,
          type: 'redeploy',
          deployment: 0,
          change: 'drop_last_job',
          rolling: false,
        },
      ],
    } as History,
  },
  {
    finding:
      "a missed-run check's report landed, the client's retry of it was refused as a conflict, and the check took it for another's: the slot reported in its record, never logged",
    history: {
      seed: -25,
      leaseSeconds: 39,
      scopes: [''],
      instances: 2,
      spanMs: 723378,
      duplicates: 0,
      dropAnswers: 0.1,
      latency: [5, 50],
      faultRate: 0.05,
      clockOffsetMs: -99950,
      jobs: [
        {
          ...job('job-0', 'wait'),
          schedule: '*/2 * * * *',
          retryCount: 1,
          minBackoffSeconds: 18,
          maxMs: 74150,
          failRate: 0.3,
        },
        {
          ...job('job-1', 'wait'),
          schedule: '*/2 * * * *',
          retryCount: 1,
          maxMs: 63540,
        },
        {
          ...job('job-2', 'skip'),
          schedule: '*/2 * * * *',
          attemptDeadlineSeconds: 30,
          maxRetryDurationSeconds: 300,
          minBackoffSeconds: 7,
          maxMs: 102341,
        },
      ],
      events: [
        { at: 1, type: 'backfill', deployment: 0 },
        { at: 179694, type: 'pause', deployment: 0, instance: 0, ms: 40578 },
      ],
    } as History,
  },
  {
    finding:
      "a Force run judged forced 30.0 s before its slot but first claimed at exactly the tolerance's edge was taken for the slot's run; the slot's own delivery, lost in an outage, was never reported",
    history: {
      seed: -14,
      leaseSeconds: 46,
      scopes: [''],
      instances: 2,
      spanMs: 180012,
      duplicates: 0,
      dropAnswers: 0.1,
      latency: [20, 400],
      faultRate: 0,
      clockOffsetMs: 82575,
      jobs: [
        job('job-0', 'allow'),
        job('job-1', 'wait'),
        { ...job('job-2', 'allow'), minMs: 3754, maxMs: 117621 },
      ],
      events: [
        { at: 88663, type: 'force', deployment: 0, job: 1 },
        { at: 88803, type: 'outage', deployment: 0, ms: 31198 },
      ],
    } as History,
  },
  {
    // The final missed-run check dies right after a `missed` report lands, before its log line
    // (`crashAfterWrite`); the check five minutes later finds it unlogged past the grace and logs
    // it (`relogged`). With the relog removed from `missed-runs.ts`, invariants 2 and 12 fail
    // (found so: `npm run simulate -- --histories 1000 --seed 5`, first history, shrunk).
    finding:
      'the final check died after writing a missed-run report, before logging it: a later check logged it',
    history: {
      seed: 14,
      leaseSeconds: 20,
      scopes: [''],
      instances: 1,
      spanMs: 180_000,
      ...quiet,
      lateAnswers: 0.05,
      crashAfterWrite: 0.05,
      firestoreTimeoutSeconds: 5,
      jobs: [
        job('job-0', 'allow'),
        job('job-1', 'allow'),
        job('job-2', 'allow'),
      ],
      events: [],
    },
  },
  {
    // A pause with `--until` the operator never resumed; the final check writes its overdue report
    // and dies before its log line (every logged write kills its writer here); the later check
    // logs it (`relogged`). With the relog removed from `pauses.ts`, invariant 12 fails.
    finding:
      "the final check died after writing a pause's overdue report, before logging it: a later check logged it",
    history: {
      seed: 7,
      leaseSeconds: 60,
      scopes: [''],
      instances: 1,
      spanMs: 240_000,
      ...quiet,
      lateAnswers: 0,
      crashAfterWrite: 1,
      firestoreTimeoutSeconds: 10,
      jobs: [{ ...job('job-0', 'allow'), attemptDeadlineSeconds: 30 }],
      events: [
        {
          at: 30_000,
          type: 'operator_pause',
          deployment: 0,
          job: 0,
          ms: 60_000,
          forgotten: true,
        },
      ],
    },
  },
  {
    // The run audit's attempt waits on a late delivery's claim (`nearAudit`) past
    // JOB_TIMEOUT_SECONDS (45 s) and its lease lapses `job_timeout`: true, but the audit's attempt
    // has no execution, and invariant 22 judged it as a job that ran 0 ms. It now judges such an
    // attempt by its answer's duration (`npm run simulate -- --seed=505`, the 611th, shrunk).
    finding:
      "the run audit's attempt ran past JOB_TIMEOUT_SECONDS and its lease lapsed job_timeout",
    history: {
      seed: 1950908234,
      leaseSeconds: 55,
      scopes: [''],
      instances: 1,
      spanMs: 1560000,
      duplicates: 0.3,
      dropAnswers: 0,
      latency: [20, 400],
      faultRate: 0.05,
      lateAnswers: 0.05,
      crashAfterWrite: 0,
      firestoreTimeoutSeconds: 2,
      clockOffsetMs: -51694,
      stubbornJobs: true,
      caseNotes: true,
      noteFills: true,
      jobTimeoutSeconds: 45,
      audit: true,
      jobs: [job('job-0', 'allow')],
      events: [
        {
          at: 0,
          type: 'late_delivery',
          deployment: 0,
          job: 0,
          ms: 30000,
          nearAudit: true,
        },
        { at: 242983, type: 'stall', deployment: 0, ms: 54114 },
      ],
    },
  },
  {
    finding:
      'issue 40, fault-biased seed 6: an attempt that slept past its lease reported its run failed after retries while a takeover completed it',
    history: {
      seed: 2110806567,
      leaseSeconds: 38,
      scopes: [''],
      instances: 2,
      spanMs: 180006,
      duplicates: 0.3,
      dropAnswers: 0,
      latency: [5, 50],
      faultRate: 0.05,
      lateAnswers: 0.2,
      crashAfterWrite: 0.05,
      firestoreTimeoutSeconds: 5,
      clockOffsetMs: -271189,
      stubbornJobs: true,
      caseNotes: true,
      noteFills: true,
      jobTimeoutSeconds: 90,
      jobs: [
        {
          id: 'job-0',
          schedule: '* * * * *',
          overlap: 'wait',
          attemptDeadlineSeconds: 15,
          retryCount: 3,
          maxRetryDurationSeconds: 0,
          minBackoffSeconds: 1,
          maxBackoffSeconds: 20,
          maxDoublings: 0,
          minMs: 30000,
          maxMs: 70000,
          failRate: 0,
          notes: true,
        },
        {
          id: 'job-1',
          schedule: '* * * * *',
          overlap: 'allow',
          attemptDeadlineSeconds: 15,
          retryCount: 0,
          maxRetryDurationSeconds: 0,
          minBackoffSeconds: 1,
          maxBackoffSeconds: 20,
          maxDoublings: 0,
          minMs: 30000,
          maxMs: 70000,
          failRate: 0,
          notes: false,
        },
      ],
      events: [
        { at: 0, deployment: 0, instance: 0, ms: 179833, type: 'pause' },
        {
          at: 61125,
          deployment: 0,
          job: 0,
          kind: 'not_a_list',
          type: 'foreign_pause',
        },
        { at: 64165, deployment: 0, ms: 115836, type: 'outage' },
        { at: 98199, deployment: 0, job: 0, resend: false, type: 'manual' },
        { at: 98236, deployment: 0, ms: 134568, type: 'stall' },
        {
          at: 119856,
          deployment: 0,
          job: 1,
          ms: 60031,
          forgotten: false,
          type: 'operator_pause',
        },
      ],
    },
  },
  {
    finding:
      'issue 40, seed 8: a slot Scheduler dispatched behind a long execution was reported failed after retries while its last retry, sent just inside maxRetryDuration after attempts that failed fast, was still to come (the check judged by the retry window, not the longest execution)',
    history: {
      seed: -1017136452,
      leaseSeconds: 30,
      scopes: [''],
      instances: 2,
      spanMs: 1560000,
      duplicates: 0,
      dropAnswers: 0.3,
      latency: [5, 50],
      faultRate: 0.01,
      lateAnswers: 0.2,
      crashAfterWrite: 0,
      firestoreTimeoutSeconds: 10,
      clockOffsetMs: 355954,
      stubbornJobs: true,
      caseNotes: true,
      noteFills: true,
      jobTimeoutSeconds: 45,
      audit: true,
      jobs: [
        {
          id: 'job-0',
          schedule: '*/2 * * * *',
          overlap: 'allow',
          attemptDeadlineSeconds: 49,
          retryCount: 0,
          maxRetryDurationSeconds: 300,
          minBackoffSeconds: 9,
          maxBackoffSeconds: 60,
          maxDoublings: 2,
          minMs: 7627,
          maxMs: 117033,
          failRate: 0,
          notes: true,
          catchUp: { graceSeconds: 30, windowSeconds: 60, slots: 'latest' },
        },
        {
          id: 'job-1',
          schedule: '*/2 * * * *',
          overlap: 'allow',
          attemptDeadlineSeconds: 46,
          retryCount: 1,
          maxRetryDurationSeconds: 0,
          minBackoffSeconds: 14,
          maxBackoffSeconds: 20,
          maxDoublings: 0,
          minMs: 19861,
          maxMs: 20000,
          failRate: 0,
          notes: true,
          catchUp: { graceSeconds: 180, windowSeconds: 180, slots: 'latest' },
        },
      ],
      events: [
        { at: 0, deployment: 0, job: 0, type: 'repair' },
        { at: 130374, deployment: 0, instance: 1, ms: 111690, type: 'hang' },
      ],
    },
  },
];

/** A history that shows a known bug whose fix is under way ({@link AWAITING_FIX}). */
export interface AwaitingFix {
  readonly fix: keyof Awaiting;
  readonly finding: string;
  readonly history: History;
  /** The violation the strict invariants give while the bug is there. */
  readonly violation: RegExp;
}

/**
 * Histories of known bugs awaiting their fixes: each shows its violation under the strict
 * invariants while its {@link AWAITING_FIX} switch is on; once the fix is merged, turn the switch
 * off and the history must keep every invariant.
 */
export const AWAITING_FIX_HISTORIES: readonly AwaitingFix[] = [
  {
    fix: 'strandedClaim',
    finding:
      "issue 40 item 1: an `allow` job's claim lands but is answered after FIRESTORE_TIMEOUT_SECONDS; its retry gets 409 in_progress behind a holder nobody is (found by `npm run simulate -- --histories 300 --seed 1`, first history, shrunk)",
    history: {
      seed: 0,
      leaseSeconds: 20,
      scopes: [''],
      instances: 1,
      spanMs: 408_353,
      duplicates: 0,
      dropAnswers: 0,
      latency: [1, 5],
      faultRate: 0,
      lateAnswers: 0.2,
      firestoreTimeoutSeconds: 2,
      clockOffsetMs: 0,
      jobs: [
        {
          ...job('job-0', 'allow'),
          retryCount: 1,
          minBackoffSeconds: 7,
          maxMs: 21_415,
        },
      ],
      events: [],
    },
    violation: /answered 409 in_progress .* a dead holder blocked it/,
  },
  {
    fix: 'rerunBehindLapsedLease',
    finding:
      'a re-run of a slot whose record stays `in_progress` under a lease that lapsed minutes ago (its holder crashed) is refused 409 "is running now" (found by `npm run simulate -- --seed 1`, history 210, not shrunk)',
    history: {
      seed: -8,
      leaseSeconds: 74,
      scopes: ['staging', 'production'],
      instances: 1,
      spanMs: 839991,
      duplicates: 0,
      dropAnswers: 0,
      latency: [1, 5],
      faultRate: 0,
      lateAnswers: 0,
      firestoreTimeoutSeconds: 2,
      clockOffsetMs: -371655,
      jobs: [
        {
          id: 'job-0',
          schedule: '*/5 * * * *',
          overlap: 'wait',
          attemptDeadlineSeconds: 90,
          retryCount: 2,
          maxRetryDurationSeconds: 60,
          minBackoffSeconds: 1,
          maxBackoffSeconds: 60,
          maxDoublings: 2,
          minMs: 8779,
          maxMs: 115565,
          failRate: 0.1,
        },
        {
          id: 'job-1',
          schedule: '*/5 * * * *',
          overlap: 'skip',
          attemptDeadlineSeconds: 38,
          retryCount: 1,
          maxRetryDurationSeconds: 60,
          minBackoffSeconds: 5,
          maxBackoffSeconds: 60,
          maxDoublings: 1,
          minMs: 110,
          maxMs: 48825,
          failRate: 0,
        },
        {
          id: 'job-2',
          schedule: '*/2 * * * *',
          overlap: 'skip',
          attemptDeadlineSeconds: 36,
          retryCount: 0,
          maxRetryDurationSeconds: 60,
          minBackoffSeconds: 1,
          maxBackoffSeconds: 20,
          maxDoublings: 2,
          minMs: 11050,
          maxMs: 134183,
          failRate: 0.1,
        },
      ],
      events: [
        {
          at: 86568,
          type: 'redeploy',
          deployment: 1,
          change: 'overlap_allow',
          rolling: true,
        },
        { at: 187615, type: 'manual', deployment: 1, job: 0, resend: false },
        { at: 253799, type: 'sigterm', deployment: 1, instance: 0 },
        { at: 480540, type: 'step', deployment: 1, instance: 0, ms: -345933 },
        { at: 545471, type: 'crash', deployment: 1, instance: 0 },
        { at: 835426, type: 'rerun', deployment: 1, job: 0 },
      ],
    } as History,
    violation:
      /\(rerun, deployment 1\) answered 409 in_progress .* a dead holder blocked it/,
  },
  {
    fix: 'lateExtension',
    finding:
      'a lease extension that lands but is answered after FIRESTORE_TIMEOUT_SECONDS: the completion does not land before the lease lapses, a retry takes over and the job runs twice (found by `npm run simulate -- --histories 1000` with seed -524424750, history 71)',
    history: {
      seed: -1325671194,
      leaseSeconds: 20,
      scopes: [''],
      instances: 2,
      spanMs: 217787,
      duplicates: 0.3,
      dropAnswers: 0,
      latency: [1, 5],
      faultRate: 0,
      lateAnswers: 0.2,
      firestoreTimeoutSeconds: 10,
      clockOffsetMs: -161232,
      jobs: [
        {
          id: 'job-0',
          schedule: '* * * * *',
          overlap: 'wait',
          attemptDeadlineSeconds: 15,
          retryCount: 0,
          maxRetryDurationSeconds: 60,
          minBackoffSeconds: 18,
          maxBackoffSeconds: 20,
          maxDoublings: 0,
          minMs: 905,
          maxMs: 20014,
          failRate: 0,
        },
        {
          id: 'job-1',
          schedule: '* * * * *',
          overlap: 'allow',
          attemptDeadlineSeconds: 15,
          retryCount: 0,
          maxRetryDurationSeconds: 300,
          minBackoffSeconds: 1,
          maxBackoffSeconds: 20,
          maxDoublings: 3,
          minMs: 100,
          maxMs: 43114,
          failRate: 0,
        },
      ],
      events: [],
    } as History,
    violation: /run 2ab25aefc1fe executed twice/,
  },
  {
    fix: 'lateExtension',
    finding:
      'an extension that lands late makes its attempt take its own record for another\'s ("another attempt took this run over"): the completion is dropped, the slot stays in progress and a later attempt runs the job again (found by `npm run simulate -- --histories 1000 --seed 1`, history 458)',
    history: {
      seed: 1060097878,
      leaseSeconds: 87,
      scopes: ['staging', 'production'],
      instances: 3,
      spanMs: 839998,
      duplicates: 0.1,
      dropAnswers: 0.3,
      latency: [5, 50],
      faultRate: 0,
      lateAnswers: 0.2,
      firestoreTimeoutSeconds: 10,
      clockOffsetMs: 351901,
      jobs: [
        {
          id: 'job-0',
          schedule: '* * * * *',
          overlap: 'wait',
          attemptDeadlineSeconds: 81,
          retryCount: 0,
          maxRetryDurationSeconds: 300,
          minBackoffSeconds: 15,
          maxBackoffSeconds: 20,
          maxDoublings: 0,
          minMs: 100,
          maxMs: 143621,
          failRate: 0.3,
        },
        {
          id: 'job-1',
          schedule: '*/5 * * * *',
          overlap: 'allow',
          attemptDeadlineSeconds: 37,
          retryCount: 0,
          maxRetryDurationSeconds: 300,
          minBackoffSeconds: 18,
          maxBackoffSeconds: 20,
          maxDoublings: 0,
          minMs: 9916,
          maxMs: 87931,
          failRate: 0.3,
        },
      ],
      events: [
        { at: 274031, type: 'hang', deployment: 1, instance: 1, ms: 50429 },
        { at: 464229, type: 'rerun', deployment: 0, job: 1 },
      ],
    } as History,
    violation: /run d4c384c2bf11 executed twice/,
  },
  {
    fix: 'claimLeaseLapsesUnseen',
    finding:
      "a run's claim lease (3 × FIRESTORE_TIMEOUT_SECONDS) lapses while its instance's Firestore connection hangs, before its heartbeat has seen two failed extensions: a `skip` job's forced run takes the lock and runs beside it, and the first run never logs a lease loss (found by `npm run simulate -- --histories 3000 --seed 7`, history 1668, shrunk; its Force run pressed at the time the generator then chose)",
    history: {
      seed: -252586149,
      leaseSeconds: 21,
      scopes: [''],
      instances: 3,
      spanMs: 296_648,
      duplicates: 0,
      dropAnswers: 0.3,
      latency: [5, 50],
      faultRate: 0.05,
      lateAnswers: 0,
      firestoreTimeoutSeconds: 5,
      clockOffsetMs: 18,
      jobs: [
        {
          ...job('job-0', 'allow'),
          schedule: '*/5 * * * *',
          minMs: 100,
          maxMs: 20_000,
        },
        {
          ...job('job-1', 'allow'),
          schedule: '*/5 * * * *',
          minMs: 100,
          maxMs: 20_000,
        },
        {
          ...job('job-2', 'skip'),
          attemptDeadlineSeconds: 30,
          maxRetryDurationSeconds: 300,
          minBackoffSeconds: 3,
          minMs: 100,
          maxMs: 42_695,
          failRate: 1,
        },
      ],
      events: [
        { at: 72_257, type: 'manual', deployment: 0, job: 2, resend: false },
        { at: 108_094, type: 'hang', deployment: 0, instance: 2, ms: 30_050 },
        {
          at: 138_000,
          type: 'force',
          deployment: 0,
          job: 2,
          withoutScheduleTime: false,
        },
      ],
    },
    violation: /overlap policy broken for job-2/,
  },
  {
    fix: 'forcedRetryClaimsFirst',
    finding:
      "a Force run's retry after the slot makes the run's first claim of a broken job while Scheduler's own execution of the slot waits behind the previous one: the failing attempt reports the final failure and Scheduler still retries (found by `npm run simulate -- --histories 3000 --seed 7`, history 316, shrunk)",
    history: {
      seed: -639896036,
      leaseSeconds: 85,
      scopes: [''],
      instances: 1,
      spanMs: 839_983,
      duplicates: 0,
      dropAnswers: 0.1,
      latency: [1, 5],
      faultRate: 0,
      lateAnswers: 0.2,
      firestoreTimeoutSeconds: 2,
      clockOffsetMs: 17,
      jobs: [
        {
          ...job('job-0', 'allow'),
          maxRetryDurationSeconds: 300,
          maxMs: 5_100,
          failRate: 1,
        },
        job('job-1', 'allow'),
      ],
      events: [
        { at: 0, type: 'manual', deployment: 0, job: 0, resend: false },
        {
          at: 60_000,
          type: 'force',
          deployment: 0,
          job: 0,
          withoutScheduleTime: false,
        },
        { at: 541_000, type: 'backfill', deployment: 0, resend: false },
      ],
    },
    violation:
      /reported "run failed after retries" .* but Cloud Scheduler still sent attempt/,
  },
  {
    fix: 'retryDecidedBeforeReport',
    finding:
      'an attempt failing after Scheduler\'s next attempt was answered 409 in_progress judges the retry limits from its own end and reports "run failed after retries" before Scheduler\'s retry (found by `npm run simulate -- --histories 300 --seed 3`, the 296th, not shrunk)',
    history: {
      seed: 1693210135,
      leaseSeconds: 66,
      scopes: ['staging', 'production'],
      instances: 2,
      spanMs: 1560000,
      duplicates: 0.3,
      dropAnswers: 0.3,
      latency: [5, 50],
      faultRate: 0,
      lateAnswers: 0,
      crashAfterWrite: 0.05,
      firestoreTimeoutSeconds: 5,
      clockOffsetMs: -518046,
      audit: true,
      jobs: [
        {
          id: 'job-0',
          schedule: '*/5 * * * *',
          overlap: 'allow',
          attemptDeadlineSeconds: 31,
          retryCount: 2,
          maxRetryDurationSeconds: 300,
          minBackoffSeconds: 18,
          maxBackoffSeconds: 20,
          maxDoublings: 3,
          minMs: 5000,
          maxMs: 10000,
          failRate: 1,
          notes: true,
          catchUp: {
            graceSeconds: 120,
            windowSeconds: 120,
            slots: 'all',
          },
        },
        {
          id: 'job-1',
          schedule: '*/2 * * * *',
          overlap: 'allow',
          attemptDeadlineSeconds: 38,
          retryCount: 0,
          maxRetryDurationSeconds: 0,
          minBackoffSeconds: 20,
          maxBackoffSeconds: 60,
          maxDoublings: 3,
          minMs: 13098,
          maxMs: 111879,
          failRate: 0,
          notes: true,
          catchUp: {
            graceSeconds: 30,
            windowSeconds: 60,
            slots: 'latest',
          },
        },
        {
          id: 'job-2',
          schedule: '* * * * *',
          overlap: 'allow',
          attemptDeadlineSeconds: 33,
          retryCount: 1,
          maxRetryDurationSeconds: 0,
          minBackoffSeconds: 1,
          maxBackoffSeconds: 20,
          maxDoublings: 1,
          minMs: 19995,
          maxMs: 30100,
          failRate: 0,
          notes: false,
        },
      ],
      events: [
        {
          at: 88438,
          type: 'operator_pause',
          deployment: 0,
          job: 0,
          ms: 60007,
          forgotten: false,
        },
        {
          at: 173031,
          type: 'foreign_record',
          deployment: 1,
          job: 2,
          kind: 'extra_fields',
        },
        {
          at: 180007,
          type: 'repair',
          deployment: 1,
          job: 2,
        },
      ],
    },
    violation:
      /reported "run failed after retries" .* but Cloud Scheduler still sent attempt/,
  },
];
