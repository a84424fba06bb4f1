/**
 * Catch-up under faults, through the handler on the emulator on a driven clock (as
 * `catch-up.test.ts`): a job paused while a late slot still waits for its catch-up, and a catch-up
 * delivery that never reaches the job.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { getTestServer } from '@google-cloud/functions-framework/testing';
import type { JobContext } from '../src/core/job-context.ts';
import { createOidcAuthenticator } from '../src/function/auth.ts';
import type { HandlerDeps } from '../src/function/handler-deps.ts';
import { startOidcIssuer } from '../src/ops/oidc-issuer.ts';
import {
  defineJob,
  type JobDeclaration,
  validateJobs,
} from '../src/policy/job-declaration.ts';
import { jobStateCollection } from '../src/policy/job-state.ts';
import { CATCH_UP_NOT_DELIVERED } from '../src/policy/late-runs.ts';
import { checkDocumentId } from '../src/policy/missed-run-cursor.ts';
import { type Pause, pausesField } from '../src/policy/pauses.ts';
import { defineAuditJob } from '../src/policy/run-audit.ts';
import { firestore, serveJobs } from './helpers.ts';

const MINUTE = 60_000;
const HOUR = 3_600_000;
/** The driven clock's start: a whole hour ahead of the real one, as in catch-up.test.ts. */
const NOON = Math.ceil(Date.now() / HOUR) * HOUR + HOUR;
const at = (minutes: number) => new Date(NOON + minutes * MINUTE);
const minuteOf = (iso: string) => (Date.parse(iso) - NOON) / MINUTE;

const servers: { close: () => void }[] = [];
after(() => {
  for (const server of servers) {
    server.close();
  }
});

type Execution = { slot: string; caughtUp: boolean };

/**
 * `declared` and the run audit every 5 minutes, served over HTTP on a driven clock; the audit's
 * deliveries carry `auditHeaders` besides Scheduler's.
 */
async function live(
  declared: JobDeclaration,
  auditHeaders: Record<string, string> = {},
  served: {
    readonly env?: Record<string, string>;
    readonly authenticate?: HandlerDeps['authenticate'];
    /** Headers of every delivery, made when it is sent (e.g. a fresh token). */
    readonly headers?: () => Record<string, string>;
  } = {},
) {
  let now = at(0);
  const executions: Execution[] = [];
  const recorded = {
    ...declared,
    run: async (ctx: JobContext) => {
      executions.push({
        slot: ctx.scheduleTime.toISOString(),
        caughtUp: ctx.caughtUp === true,
      });
      await declared.run(ctx);
    },
  };
  const audit = defineAuditJob({ id: 'run-audit', schedule: '*/5 * * * *' });
  const jobs = validateJobs([recorded, audit]);
  const fn = serveJobs(
    jobs,
    {
      env: { MISSED_RUN_CHECK: 'on', ...served.env },
      ...(served.authenticate === undefined
        ? {}
        : { authenticate: served.authenticate }),
    },
    { clock: async () => now },
  );
  const server = getTestServer(fn.name);
  await new Promise<void>((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve()),
  );
  servers.push(server);
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const deliver = async (jobId: string, slot: Date, delaySeconds: number) => {
    now = new Date(slot.getTime() + delaySeconds * 1000);
    const extra = jobId === 'run-audit' ? auditHeaders : {};
    const res = await fetch(url, {
      method: 'POST',
      headers: {
        'X-CloudScheduler-JobName': jobId,
        'X-CloudScheduler-ScheduleTime': slot.toISOString(),
        ...served.headers?.(),
        ...extra,
      },
    });
    return ((await res.json()) as { outcome: string }).outcome;
  };
  /**
   * Minutes `from` to `to` (exclusive): each slot of `tick` delivered unless `skip` says Scheduler
   * sent nothing, and the audit every 5 minutes, all at their own time.
   */
  const timeline = async (
    from: number,
    to: number,
    skip: (minute: number) => boolean,
  ) => {
    for (let m = from; m < to; m++) {
      if (!skip(m)) {
        assert.equal(await deliver('tick', at(m), 5), 'processed');
      }
      if (m % 5 === 0) {
        await deliver('run-audit', at(m), 10);
      }
    }
  };
  const lines = (message: string) =>
    fn.logs.lines().filter((line) => line.message === message);
  const writePause = (pause: Pause) =>
    firestore
      .collection(jobStateCollection(fn.collection))
      .doc(checkDocumentId('tick', []))
      .set({ job_name: 'tick', pauses: pausesField([pause]) });
  return { timeline, executions, lines, writePause };
}

describe('catch-up of a job paused while its late slots wait', () => {
  it('delivers none of the waiting slots while the job is paused', async () => {
    const run = await live(
      defineJob({
        id: 'tick',
        schedule: '* * * * *',
        catchUp: { slots: 'all' },
        run: () => {},
      }),
    );
    // Scheduler sent nothing for +6 to +8; the audit at +10 names them late and catches up +6.
    const gap = (m: number) => m >= 6 && m <= 8;
    await run.timeline(0, 11, gap);
    const pausedAt = new Date(at(11).getTime() + 30_000);
    await run.writePause({
      pausedAt,
      until: at(120),
      note: 'downstream migration',
      resumedAt: undefined,
      overdueReportedAt: undefined,
    });
    // Scheduler sent nothing from +11 (the slot before the pause included, late at +15), then
    // fires nothing inside the pause; the audit still checks every 5 minutes.
    await run.timeline(11, 31, () => true);

    const caughtUp = run.executions.filter((e) => e.caughtUp);
    assert.deepEqual(
      caughtUp.map((e) => minuteOf(e.slot)),
      [6],
      'only the slot caught up before the pause ran; +7, +8 and +11 wait for the resume',
    );
    const lateDuringPause = run
      .lines('late run')
      .filter((l) => l.slot === at(11).toISOString());
    assert.deepEqual(
      lateDuringPause.map((l) => l.follows),
      [
        'caught up after the job is resumed, if still within the catch-up window',
      ],
    );
  });
});

describe('a catch-up delivery that never reaches the job', () => {
  it('is told in a warning naming the slot and why, not only as "caught up now"', async () => {
    // The audit's request carries a token, so its catch-up needs an ID token of the function's
    // account, which this machine has none of (no metadata server): the delivery is never sent.
    const run = await live(
      defineJob({
        id: 'tick',
        schedule: '* * * * *',
        catchUp: {},
        run: () => {},
      }),
      { Authorization: 'Bearer a-token-the-front-end-checked' },
    );
    await run.timeline(0, 11, (m) => m === 7);

    const slot = at(7).toISOString();
    assert.deepEqual(
      run.executions.filter((e) => e.slot === slot),
      [],
    );
    const warned = run.lines(CATCH_UP_NOT_DELIVERED);
    assert.deepEqual(
      warned.map((l) => [l.severity, l.jobName, l.slot]),
      [['WARNING', 'tick', slot]],
    );
    assert.match(String(warned[0]?.reason), /no ID token/);
    const done = run.lines('run audit done').at(-1);
    assert.equal(done?.caughtUp, 0, 'the audit counts no slot caught up');
  });
});

describe('catch-up under npm run dev with AUTH_MODE=verify-oidc', () => {
  it('authenticates the audit’s delivery with a token of the local issuer, and runs the slot', async () => {
    // As `npm run dev` sets it up: a local issuer, its certificates in OIDC_CERTS_URL, the
    // local Scheduler's made-up invoker, and the function's URL as the audience.
    const issuer = await startOidcIssuer();
    after(() => issuer.close());
    const audience = 'http://127.0.0.1:8080/';
    const invoker = 'local-scheduler@dev.invalid';
    const oidc = { audience, invokers: [invoker], certsUrl: issuer.certsUrl };
    const run = await live(
      defineJob({
        id: 'tick',
        schedule: '* * * * *',
        catchUp: {},
        run: () => {},
      }),
      {},
      {
        env: {
          AUTH_MODE: 'verify-oidc',
          OIDC_AUDIENCE: audience,
          OIDC_INVOKERS: invoker,
          OIDC_CERTS_URL: issuer.certsUrl,
        },
        authenticate: createOidcAuthenticator(oidc),
        headers: () => ({
          Authorization: `Bearer ${issuer.token(audience, invoker)}`,
        }),
      },
    );
    await run.timeline(0, 11, (m) => m === 7);

    const slot = at(7).toISOString();
    assert.deepEqual(
      run.executions.filter((e) => e.slot === slot),
      [{ slot, caughtUp: true }],
      JSON.stringify(run.lines(CATCH_UP_NOT_DELIVERED)),
    );
  });
});
