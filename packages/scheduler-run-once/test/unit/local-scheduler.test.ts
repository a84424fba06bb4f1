/**
 * The local Scheduler's core (`src/ops/local-scheduler.ts`) with a driven clock, a fake transport and
 * a scripted chance: no function, no emulator, no waiting. The clock starts just before a slot and
 * the test moves it on; the transport records each delivery and answers as the case needs (taking
 * fake time where a function would be slow).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { firingList, formatEvent } from '../../src/ops/format-events.ts';
import {
  type Answer,
  type AttemptEvent,
  type Delivery,
  LocalScheduler,
  type LocalSchedulerOptions,
  type SchedulerEvent,
  type SchedulerJob,
  type SchedulerState,
  type SchedulerStateStore,
  sleepOn,
} from '../../src/ops/local-scheduler.ts';
import { JOB_DEFAULTS } from '../../src/policy/job-declaration.ts';
import { nextSlots, toUtcRfc3339 } from '../../src/policy/schedule.ts';
import { FakeClock } from '../fixtures/fake-clock.ts';

const S = 1000;
const MIN = 60 * S;

/** A job with the defaults of `job-declaration.ts` and the given settings. */
function job(
  settings: Partial<SchedulerJob> & Pick<SchedulerJob, 'id' | 'schedule'>,
): SchedulerJob {
  return { ...JOB_DEFAULTS, ...settings };
}

/** A JSON answer as the function gives it. */
function answer(status: number, outcome: string): Answer {
  return {
    status,
    body: JSON.stringify({ outcome, runId: 'r', message: '…' }),
  };
}

interface Sent extends Delivery {
  readonly at: number;
}

/**
 * A scheduler on a fake clock starting at `start`, whose deliveries `respond` answers (it may
 * wait on the clock), and whose chance comes from `chances` in order (then 0.5).
 */
function harness(
  start: string,
  options: Omit<LocalSchedulerOptions, 'url' | 'clock' | 'send'> & {
    respond?: (
      delivery: Delivery,
      signal: AbortSignal,
      clock: FakeClock,
    ) => Promise<Answer>;
    chances?: number[];
  },
) {
  const clock = new FakeClock(Date.parse(start));
  const sent: Sent[] = [];
  const events: SchedulerEvent[] = [];
  const chances = [...(options.chances ?? [])];
  const respond = options.respond ?? (async () => answer(200, 'processed'));
  const scheduler = new LocalScheduler({
    ...options,
    url: 'http://127.0.0.1:8080/',
    clock,
    random: () => chances.shift() ?? 0.5,
    send: (delivery, signal) => {
      sent.push({ ...delivery, at: clock.now() });
      return respond(delivery, signal, clock);
    },
    onEvent: (event) => events.push(event),
  });
  const attempts = () =>
    events.filter((e): e is AttemptEvent => e.type === 'attempt');
  return { clock, scheduler, sent, events, attempts };
}

/** Resolves with `answer` after `ms` on the clock; rejects when `signal` aborts first. */
function slowAnswer(
  clock: FakeClock,
  ms: number,
  signal: AbortSignal,
  value: Answer,
) {
  return new Promise<Answer>((resolve, reject) => {
    const cancel = clock.setTimer(() => resolve(value), ms);
    signal.addEventListener('abort', () => {
      cancel();
      reject(signal.reason);
    });
  });
}

describe('LocalScheduler: firing on the schedule', () => {
  it('fires each job at every slot of its cron in its time zone, and not before', async () => {
    const every5 = job({ id: 'every-five', schedule: '*/5 * * * *' });
    // 02:00 in Berlin happens twice on 25 October 2026, the night clocks go back.
    const berlin = job({
      id: 'berlin',
      schedule: '0 2 * * *',
      timeZone: 'Europe/Berlin',
    });
    const { clock, scheduler, sent } = harness('2026-10-24T23:59:00Z', {
      jobs: [every5, berlin],
    });

    scheduler.start();
    await clock.advance(MIN - 1);
    const beforeTheSlot = sent.length;
    await clock.advance(1 + 70 * MIN);
    await scheduler.stop();

    assert.equal(beforeTheSlot, 0);
    const timesOf = (id: string) =>
      sent
        .filter((d) => d.headers['X-CloudScheduler-JobName'] === id)
        .map((d) => d.headers['X-CloudScheduler-ScheduleTime']);
    const window = new Date('2026-10-24T23:59:00Z');
    assert.deepEqual(timesOf('berlin'), [
      '2026-10-25T00:00:00Z',
      '2026-10-25T01:00:00Z',
    ]);
    assert.deepEqual(
      timesOf('every-five'),
      nextSlots(every5, window, 15).map(toUtcRfc3339),
    );
    assert.ok(
      sent.every(
        (d) =>
          d.at === Date.parse(d.headers['X-CloudScheduler-ScheduleTime'] ?? ''),
      ),
      'each delivery is sent at its slot',
    );
  });

  it("sends what Scheduler sends: POST, the short job id, the slot in UTC, Scheduler's user agent, the job's headers and query", async () => {
    const { clock, scheduler, sent } = harness('2026-10-24T12:04:59Z', {
      jobs: [job({ id: 'scheduled-job', schedule: '*/5 * * * *' })],
      headers: { 'X-Env': 'dev', 'user-agent': 'mine' },
      query: 'tenant=acme&env=dev',
    });

    scheduler.start();
    await clock.advance(S);
    await scheduler.stop();

    assert.deepEqual(sent, [
      {
        at: Date.parse('2026-10-24T12:05:00Z'),
        url: 'http://127.0.0.1:8080/?tenant=acme&env=dev',
        method: 'POST',
        headers: {
          'X-Env': 'dev',
          'User-Agent': 'Google-Cloud-Scheduler',
          'X-CloudScheduler-JobName': 'scheduled-job',
          'X-CloudScheduler-ScheduleTime': '2026-10-24T12:05:00Z',
        },
      },
    ]);
  });

  it('adds an OIDC token for the audience as the invoker when given a token source', async () => {
    const issued: unknown[] = [];
    const { clock, scheduler, sent } = harness('2026-10-24T12:04:59Z', {
      jobs: [job({ id: 'scheduled-job', schedule: '*/5 * * * *' })],
      tokens: {
        audience: 'https://fn.example',
        email: 'invoker@p.iam.gserviceaccount.com',
        token: (audience, email, nowMs) => {
          issued.push([audience, email, nowMs]);
          return 'signed.id.token';
        },
      },
    });

    scheduler.start();
    await clock.advance(S);
    await scheduler.stop();

    assert.equal(sent[0]?.headers.Authorization, 'Bearer signed.id.token');
    assert.deepEqual(issued, [
      ['https://fn.example', 'invoker@p.iam.gserviceaccount.com', clock.now()],
    ]);
  });

  it('delays a slot that comes while the previous execution still retries, and skips a further one', async () => {
    // 12:01 fails once and is retried 150 s later, past 12:02 and 12:03.
    const { clock, scheduler, sent, events } = harness('2026-10-24T12:00:59Z', {
      jobs: [
        job({
          id: 'every-minute',
          schedule: '* * * * *',
          minBackoffSeconds: 150,
          maxBackoffSeconds: 150,
          retryCount: 1,
          maxRetryDurationSeconds: 0,
        }),
      ],
      respond: async (delivery) =>
        delivery.headers['X-CloudScheduler-ScheduleTime'] ===
        '2026-10-24T12:01:00Z'
          ? answer(500, 'failed')
          : answer(200, 'processed'),
    });

    scheduler.start();
    await clock.advance(S + 3 * MIN - 1);
    await scheduler.stop();

    // 12:01 at 12:01:00, its retry at 12:03:30; 12:02 delayed until then, 12:03 skipped.
    assert.deepEqual(
      sent.map((d) => [
        d.headers['X-CloudScheduler-ScheduleTime'],
        new Date(d.at).toISOString().slice(11, 19),
      ]),
      [
        ['2026-10-24T12:01:00Z', '12:01:00'],
        ['2026-10-24T12:01:00Z', '12:03:30'],
        ['2026-10-24T12:02:00Z', '12:03:30'],
      ],
    );
    assert.deepEqual(
      events
        .filter((e) => e.type === 'delayed' || e.type === 'skipped')
        .map((e) => [e.type, toUtcRfc3339(e.scheduleTime)]),
      [
        ['delayed', '2026-10-24T12:02:00Z'],
        ['skipped', '2026-10-24T12:03:00Z'],
      ],
    );
    assert.match(
      formatEvent(events.find((e) => e.type === 'delayed') as SchedulerEvent),
      /delayed: fires when the execution of slot 2026-10-24T12:01:00Z ends/,
    );
  });

  it('drops the retries of a job that is no longer declared after setJobs, and says so in one line', async () => {
    const { clock, scheduler, sent, events } = harness('2026-10-24T12:00:59Z', {
      jobs: [
        job({ id: 'old-name', schedule: '* * * * *', minBackoffSeconds: 30 }),
      ],
      respond: async () => answer(404, 'unknown_job'),
    });

    scheduler.start();
    await clock.advance(2 * S);
    scheduler.setJobs([job({ id: 'new-name', schedule: '0 0 1 1 *' })]);
    await clock.advance(10 * MIN);
    await scheduler.stop();

    assert.equal(sent.length, 1, 'no retry after the reload');
    const dropped = events.filter((e) => e.type === 'dropped');
    assert.equal(dropped.length, 1);
    assert.equal(
      formatEvent(dropped[0] as SchedulerEvent).trim(),
      'old-name  slot 2026-10-24T12:01:00Z  dropped: old-name is no longer declared, so its retries stop (its history: npm run runs -- --job old-name)',
    );
  });

  it('re-arms from now with new settings after setJobs', async () => {
    const { clock, scheduler, sent } = harness('2026-10-24T12:04:59Z', {
      jobs: [job({ id: 'a', schedule: '*/5 * * * *' })],
    });

    scheduler.start();
    scheduler.setJobs([job({ id: 'a', schedule: '*/10 * * * *' })]);
    await clock.advance(10 * MIN);
    await scheduler.stop();

    assert.deepEqual(
      sent.map((d) => d.headers['X-CloudScheduler-ScheduleTime']),
      ['2026-10-24T12:10:00Z'],
    );
  });
});

describe('LocalScheduler: attempts and retries', () => {
  it('gives up an attempt at its deadline and retries with back-off while the first still runs: 409, then duplicate', async () => {
    // A "function" whose run takes 40 s: while it runs a retry gets 409, after it 200 duplicate.
    let runEnds = 0;
    const { clock, scheduler, attempts } = harness('2026-10-24T12:04:59Z', {
      jobs: [
        job({
          id: 'slow',
          schedule: '*/5 * * * *',
          attemptDeadlineSeconds: 15,
          retryCount: 3,
          maxRetryDurationSeconds: 0,
          minBackoffSeconds: 5,
          maxBackoffSeconds: 40,
          maxDoublings: 1,
        }),
      ],
      respond: (_delivery, signal, c) => {
        if (runEnds === 0) {
          runEnds = c.now() + 40 * S;
          return slowAnswer(c, 40 * S, signal, answer(200, 'processed'));
        }
        return Promise.resolve(
          c.now() < runEnds
            ? answer(409, 'in_progress')
            : answer(200, 'duplicate'),
        );
      },
    });

    scheduler.start();
    await clock.advance(S + 2 * MIN);
    await scheduler.stop();

    const slot = Date.parse('2026-10-24T12:05:00Z');
    assert.deepEqual(
      attempts().map((e) => [
        e.attempt,
        e.startedAt - slot,
        e.status,
        e.outcome,
        e.next,
      ]),
      [
        [1, 0, undefined, 'deadline_exceeded', { kind: 'retry', inMs: 5 * S }],
        [2, 20 * S, 409, 'in_progress', { kind: 'retry', inMs: 10 * S }],
        [3, 30 * S, 409, 'in_progress', { kind: 'retry', inMs: 20 * S }],
        [4, 50 * S, 200, 'duplicate', { kind: 'succeeded' }],
      ],
    );
    assert.equal(attempts()[0]?.durationMs, 15 * S);
  });

  it('retries a failing run retryCount times at the documented back-off, then gives up', async () => {
    const { clock, scheduler, attempts } = harness('2026-10-24T12:04:59Z', {
      jobs: [
        job({
          id: 'failing',
          schedule: '0 * * * *',
          retryCount: 5,
          maxRetryDurationSeconds: 0,
          minBackoffSeconds: 10,
          maxBackoffSeconds: 300,
          maxDoublings: 3,
        }),
      ],
      respond: async () => answer(500, 'failed'),
    });

    scheduler.start();
    await clock.advance(S + 60 * MIN + 10 * S);
    await scheduler.stop();

    const starts = attempts().map(
      (e) => (e.startedAt - Date.parse('2026-10-24T13:00:00Z')) / S,
    );
    // The waits of RetryConfig's example, 10, 20, 40, 80, 160 s, one after another.
    assert.deepEqual(starts, [0, 10, 30, 70, 150, 310]);
    assert.deepEqual(attempts().at(-1)?.next, { kind: 'gave_up', retries: 5 });
  });

  it('retries after a dropped answer (a lost acknowledgement) although the delivery succeeded', async () => {
    const { clock, scheduler, attempts, sent } = harness(
      '2026-10-24T12:04:59Z',
      {
        jobs: [job({ id: 'j', schedule: '*/5 * * * *' })],
        // Attempt 1: no duplicate (0.9), answer dropped (0.1); attempt 2: no duplicate, kept.
        chances: [0.9, 0.1, 0.9, 0.9],
        dropAnswers: 0.5,
        respond: async () =>
          sent.length === 1
            ? answer(200, 'processed')
            : answer(200, 'duplicate'),
      },
    );

    scheduler.start();
    await clock.advance(S + 2 * MIN);
    await scheduler.stop();

    assert.deepEqual(
      attempts().map((e) => [
        e.attempt,
        e.status,
        e.outcome,
        e.answerDropped,
        e.next.kind,
      ]),
      [
        [1, 200, 'processed', true, 'retry'],
        [2, 200, 'duplicate', false, 'succeeded'],
      ],
    );
  });

  it('adds a duplicate delivery at the same time as the attempt', async () => {
    const { clock, scheduler, attempts, sent } = harness(
      '2026-10-24T12:04:59Z',
      {
        jobs: [job({ id: 'j', schedule: '*/5 * * * *' })],
        chances: [0.1, 0.9],
        duplicates: 0.5,
      },
    );

    scheduler.start();
    await clock.advance(S);
    await scheduler.stop();

    assert.equal(sent.length, 2);
    assert.deepEqual(sent[0], sent[1]);
    assert.deepEqual(
      attempts()
        .map((e) => e.delivery)
        .sort(),
      ['duplicate', 'primary'],
    );
  });

  it('reports a refused connection as no answer and retries', async () => {
    const { clock, scheduler, attempts } = harness('2026-10-24T12:04:59Z', {
      jobs: [job({ id: 'j', schedule: '*/5 * * * *', minBackoffSeconds: 1 })],
      respond: async () => {
        throw new TypeError('fetch failed', {
          cause: new Error('connect ECONNREFUSED 127.0.0.1:8080'),
        });
      },
    });

    scheduler.start();
    await clock.advance(S);
    await scheduler.stop();

    const [first] = attempts();
    assert.equal(first?.outcome, 'no_answer');
    assert.equal(first?.error, 'connect ECONNREFUSED 127.0.0.1:8080');
    assert.deepEqual(first?.next, { kind: 'retry', inMs: S });
  });
});

describe('LocalScheduler.fire: a forced run', () => {
  it("carries the job's next slot as its schedule time, even while an execution is outstanding", async () => {
    const { clock, scheduler, sent } = harness('2026-10-24T12:01:30Z', {
      jobs: [job({ id: 'j', schedule: '*/5 * * * *' })],
    });

    const result = await scheduler.fire('j');
    await clock.advance(0);

    assert.deepEqual(result, {
      jobId: 'j',
      scheduleTime: new Date('2026-10-24T12:05:00Z'),
      succeeded: true,
      attempts: 1,
      lastStatus: 200,
    });
    assert.equal(
      sent[0]?.headers['X-CloudScheduler-ScheduleTime'],
      '2026-10-24T12:05:00Z',
    );
  });

  it('sends no X-CloudScheduler-ScheduleTime with withoutScheduleTime, on every attempt, and says so', async () => {
    const { clock, scheduler, sent, events } = harness('2026-10-24T12:01:30Z', {
      jobs: [
        job({
          id: 'j',
          schedule: '*/5 * * * *',
          retryCount: 1,
          maxRetryDurationSeconds: 0,
        }),
      ],
      headers: { 'x-cloudscheduler-scheduletime': '2026-10-24T12:00:00Z' },
      respond: async () => answer(503, 'unavailable'),
    });

    const fired = scheduler.fire('j', { withoutScheduleTime: true });
    await clock.advance(MIN);
    await fired;

    assert.equal(sent.length, 2);
    for (const delivery of sent) {
      const names = Object.keys(delivery.headers).map((name) =>
        name.toLowerCase(),
      );
      assert.ok(
        !names.includes('x-cloudscheduler-scheduletime'),
        names.join(', '),
      );
      assert.equal(delivery.headers['X-CloudScheduler-JobName'], 'j');
    }
    assert.match(
      formatEvent(events[0] as SchedulerEvent),
      /attempt 1 \(forced run, no ScheduleTime sent\)/,
    );
  });

  it('follows its retries and reports failure when Scheduler gives up', async () => {
    const { clock, scheduler } = harness('2026-10-24T12:01:30Z', {
      jobs: [
        job({
          id: 'j',
          schedule: '*/5 * * * *',
          retryCount: 1,
          maxRetryDurationSeconds: 0,
        }),
      ],
      respond: async () => answer(503, 'unavailable'),
    });

    const fired = scheduler.fire('j');
    await clock.advance(MIN);

    assert.deepEqual(await fired, {
      jobId: 'j',
      scheduleTime: new Date('2026-10-24T12:05:00Z'),
      succeeded: false,
      attempts: 2,
      lastStatus: 503,
    });
  });

  it('names the declared jobs when asked for an unknown one', () => {
    const { scheduler } = harness('2026-10-24T12:01:30Z', {
      jobs: [
        job({ id: 'a', schedule: '*/5 * * * *' }),
        job({ id: 'b', schedule: '0 * * * *' }),
      ],
    });

    assert.throws(
      () => scheduler.fire('c'),
      /no job "c" is declared; declared: a, b/,
    );
  });
});

describe('LocalScheduler: pauses', () => {
  it('fires no slot inside a pause, says so with its note, and fires again after the resume', async () => {
    const start = Date.parse('2026-10-24T12:00:30Z');
    const resumeAt = start + 2 * MIN;
    const asked: string[] = [];
    const { clock, scheduler, sent, events } = harness('2026-10-24T12:00:30Z', {
      jobs: [job({ id: 'every-minute', schedule: '* * * * *' })],
      pauseOf: async (jobId, slot) => {
        asked.push(`${jobId} ${toUtcRfc3339(slot)}`);
        return slot.getTime() < resumeAt ? 'db maintenance' : undefined;
      },
    });

    scheduler.start();
    await clock.advance(3 * MIN);
    await scheduler.stop();

    assert.deepEqual(
      sent.map((d) => d.headers['X-CloudScheduler-ScheduleTime']),
      ['2026-10-24T12:03:00Z'],
    );
    const paused = events.filter((e) => e.type === 'paused');
    assert.deepEqual(
      paused.map((e) => formatEvent(e).trim()),
      [
        'every-minute  slot 2026-10-24T12:01:00Z  paused (db maintenance): not fired (npm run resume -- every-minute)',
        'every-minute  slot 2026-10-24T12:02:00Z  paused (db maintenance): not fired (npm run resume -- every-minute)',
      ],
    );
    assert.equal(asked.length, 3, 'asked once per slot');
  });

  it('fires a slot whose pause could not be read, as Scheduler knows nothing of the record', async () => {
    const { clock, scheduler, sent } = harness('2026-10-24T12:00:30Z', {
      jobs: [job({ id: 'every-minute', schedule: '* * * * *' })],
      pauseOf: () => Promise.reject(new Error('emulator down')),
    });

    scheduler.start();
    await clock.advance(MIN);
    await scheduler.stop();

    assert.equal(sent.length, 1);
  });
});

describe('firingList', () => {
  it('names each job with its schedule, zone and next slot: the line npm run dev prints after a reload', () => {
    const jobs = [
      job({ id: 'a', schedule: '*/5 * * * *' }),
      job({ id: 'b', schedule: '0 2 * * *', timeZone: 'Europe/Berlin' }),
    ];

    assert.equal(
      firingList(jobs, new Date('2026-10-24T12:01:00Z')),
      'a (*/5 * * * *, Etc/UTC; next 2026-10-24T12:05:00Z), b (0 2 * * *, Europe/Berlin; next 2026-10-25T00:00:00Z)',
    );
  });
});

describe('formatEvent', () => {
  it('prints one line per delivery: time, job, slot, attempt, answer, duration, what follows', () => {
    const base = {
      type: 'attempt',
      jobId: 'slow',
      scheduleTime: new Date('2026-10-24T12:05:00Z'),
      forced: false,
      scheduleTimeSent: true,
      delivery: 'primary',
      answerDropped: false,
    } as const;

    const lines = [
      formatEvent({
        ...base,
        attempt: 1,
        startedAt: Date.parse('2026-10-24T12:05:00.003Z'),
        durationMs: 15_000,
        outcome: 'deadline_exceeded',
        next: { kind: 'retry', inMs: 5000 },
      }),
      formatEvent({
        ...base,
        attempt: 2,
        startedAt: Date.parse('2026-10-24T12:05:20.010Z'),
        durationMs: 42,
        status: 409,
        outcome: 'in_progress',
        answerDropped: true,
        next: { kind: 'gave_up', retries: 1 },
      }),
    ];

    assert.deepEqual(lines, [
      '12:05:00.003Z  slow  slot 2026-10-24T12:05:00Z  attempt 1  deadline exceeded      15.00 s  retry in 5.00 s',
      '12:05:20.010Z  slow  slot 2026-10-24T12:05:00Z  attempt 2  409 in_progress         0.04 s  answer dropped; gave up after 1 retry',
    ]);
  });
});

describe('sleepOn', () => {
  it('ends when its signal aborts, before its time', async () => {
    const clock = new FakeClock(0);
    const stop = new AbortController();
    let done = false;

    const sleeping = sleepOn(clock, 60 * MIN, stop.signal).then(() => {
      done = true;
    });
    stop.abort();
    await sleeping;

    assert.equal(done, true);
    assert.equal(clock.pending, 0);
  });
});

describe('LocalScheduler: what it owes, kept across a crash', () => {
  /** A store in memory, as `.run-once/scheduler.json` keeps it (through JSON, as the file does). */
  function memoryStore(): SchedulerStateStore & {
    kept: () => SchedulerState | undefined;
  } {
    let text: string | undefined;
    return {
      load: () => (text === undefined ? undefined : JSON.parse(text)),
      save: (state) => {
        text = JSON.stringify(state);
      },
      kept: () => (text === undefined ? undefined : JSON.parse(text)),
    };
  }

  it('after a crash, resumes the retry in back-off and delivers the newest slot of the crash window, once, reporting the older ones', async () => {
    const state = memoryStore();
    const failing = job({
      id: 'every-minute',
      schedule: '* * * * *',
      retryCount: 3,
      minBackoffSeconds: 60,
      maxBackoffSeconds: 60,
    });
    // The first run: slot 12:01 fails, its retry waits 60 s; the process dies during the wait.
    const first = harness('2026-10-24T12:00:59Z', {
      jobs: [failing],
      state,
      respond: async () => answer(500, 'failed'),
    });
    first.scheduler.start();
    await first.clock.advance(S + 10 * S);
    assert.equal(first.sent.length, 1);
    assert.deepEqual(
      state.kept()?.retries.map((r) => [r.scheduleTime, r.attempt]),
      [['2026-10-24T12:01:00.000Z', 2]],
    );
    assert.equal(
      state.kept()?.lastSlots['every-minute'],
      '2026-10-24T12:01:00.000Z',
    );
    // No stop: a crash. The first clock never moves again, so its timers never fire.

    // The restart, at 12:05:30: slots 12:02 to 12:05 passed while nothing ran.
    const second = harness('2026-10-24T12:05:30Z', {
      jobs: [failing],
      state,
    });
    second.scheduler.start();
    await second.clock.advance(10 * S);
    await second.scheduler.stop();

    const delivered = second
      .attempts()
      .map((e) => [toUtcRfc3339(e.scheduleTime), e.attempt]);
    assert.deepEqual(delivered, [
      ['2026-10-24T12:01:00Z', 2],
      ['2026-10-24T12:05:00Z', 1],
    ]);
    const recovered = second.events.filter((e) => e.type === 'recovered');
    assert.deepEqual(
      recovered.map((e) => [
        e.jobId,
        toUtcRfc3339(e.scheduleTime),
        e.type === 'recovered' && e.missed,
      ]),
      [['every-minute', '2026-10-24T12:05:00Z', 4]],
    );
    assert.match(
      formatEvent(recovered[0] as SchedulerEvent),
      /recovered: came while no Scheduler ran .* 3 older missed slot\(s\) not delivered/,
    );
    assert.deepEqual(state.kept()?.retries, []);
  });

  it('delivers nothing late on a first start, without a kept state', async () => {
    const state = memoryStore();
    const { clock, scheduler, sent } = harness('2026-10-24T12:05:30Z', {
      jobs: [job({ id: 'j', schedule: '* * * * *' })],
      state,
    });
    scheduler.start();
    await clock.advance(10 * S);
    await scheduler.stop();
    assert.equal(sent.length, 0);
  });
});
