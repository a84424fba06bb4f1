/**
 * The simulator's invariant 52 (`test/sim/retention-invariants.ts`): a deploy starts only with a
 * retention that outlasts every job's judging delay plus its forced-run tolerance, and a refusal
 * names what to raise. The bounds are the model's, checked here against the documented defaults;
 * the problems are the function's own cold start's (`loadConfigAndJobs`), then altered by hand.
 * No simulation, no Firestore.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/core/errors.ts';
import { loadConfigAndJobs } from '../../src/function/register.ts';
import { defineJob } from '../../src/policy/job-declaration.ts';
import {
  type RetentionProbe,
  retentionBoundOf,
  retentionEdgesSeconds,
  retentionGateKept,
} from '../sim/retention-invariants.ts';
import type { SimOutcome } from '../sim/simulator.ts';

const START_MS = Date.UTC(2026, 0, 5, 1, 0);

/** A per-minute job with Scheduler's default retries (docs/configuration.md: 7740 s judging delay). */
const DECLARATIONS = [
  defineJob({ id: 'every-minute', schedule: '* * * * *', run: async () => {} }),
];

const ENV = {
  NODE_ENV: 'test',
  LEASE_SECONDS: '60',
  RUNS_COLLECTION: 'runs',
};

/** The cold start's problems with `retentionSeconds`, or `undefined` if it starts. */
function coldStart(retentionSeconds: number): readonly string[] | undefined {
  try {
    loadConfigAndJobs(DECLARATIONS, {
      ...ENV,
      RETENTION_SECONDS: String(retentionSeconds),
    });
    return undefined;
  } catch (err) {
    if (err instanceof ConfigError) {
      return err.problems;
    }
    throw err;
  }
}

/** The probes the simulator makes of {@link DECLARATIONS}, with the cold start's answers. */
function probes(): RetentionProbe[] {
  const { config, jobs } = loadConfigAndJobs(DECLARATIONS, ENV);
  const bounds = jobs.map((job) =>
    retentionBoundOf(job, config.forcedRunToleranceMs, START_MS),
  );
  return retentionEdgesSeconds(bounds, jobs).map((retentionSeconds) => ({
    at: START_MS,
    retentionSeconds,
    leaseSeconds: 60,
    bounds,
    problems: coldStart(retentionSeconds),
  }));
}

function outcomeOf(retentionProbes: RetentionProbe[]): SimOutcome {
  return { retentionProbes } as unknown as SimOutcome;
}

describe('sim invariant 52: the retention a deploy starts with', () => {
  it("takes the documented defaults' bound: 7740 s of judging delay plus 30 s of tolerance", () => {
    const [probe] = probes();
    assert.deepEqual(probe?.bounds, [
      { jobId: 'every-minute', judgingDelayMs: 7_740_000, toleranceMs: 30_000 },
    ]);
    assert.deepEqual(
      probes().map((p) => p.retentionSeconds),
      [7770, 7771, 210],
    );
  });

  it("holds for the function's own cold start at each edge", () => {
    const found = probes();
    assert.deepEqual(
      found.map((p) => p.problems !== undefined),
      [true, false, true],
    );
    assert.deepEqual(retentionGateKept(outcomeOf(found)), []);
  });

  it('fails a deploy that started at the bound', () => {
    const [atBound, ...rest] = probes();
    const started = { ...(atBound as RetentionProbe), problems: undefined };
    assert.match(
      retentionGateKept(outcomeOf([started, ...rest])).join('\n'),
      /started with RETENTION_SECONDS 7770, not above job every-minute's judging delay of 7740 s plus its forced-run tolerance of 30 s/,
    );
  });

  it('fails a deploy refused a second above the bound', () => {
    const [atBound, above, lowest] = probes() as [
      RetentionProbe,
      RetentionProbe,
      RetentionProbe,
    ];
    const refused = { ...above, problems: atBound.problems };
    assert.match(
      retentionGateKept(outcomeOf([atBound, refused, lowest])).join('\n'),
      /RETENTION_SECONDS 7771, above every job's judging delay plus tolerance and above LEASE_SECONDS 60, was refused/,
    );
  });

  it('fails a refusal that does not say which job and numbers to raise it for', () => {
    const [atBound, above, lowest] = probes() as [
      RetentionProbe,
      RetentionProbe,
      RetentionProbe,
    ];
    const vague = {
      ...atBound,
      problems: ['RETENTION_SECONDS is too short'],
    };
    const wrongTolerance = {
      ...lowest,
      problems: (lowest.problems ?? []).map((p) =>
        p.replace('tolerance (30 s)', 'tolerance (30000 s)'),
      ),
    };
    const found = retentionGateKept(outcomeOf([vague, above, wrongTolerance]));
    assert.equal(found.length, 2, found.join('\n'));
    assert.match(found[0] ?? '', /RETENTION_SECONDS 7770 was refused without/);
    assert.match(found[1] ?? '', /RETENTION_SECONDS 210 was refused without/);
  });

  it('takes a retention not above LEASE_SECONDS as refused for the lease alone', () => {
    const [probe] = probes();
    const underLease = {
      ...(probe as RetentionProbe),
      leaseSeconds: 9000,
      problems: ['RETENTION_SECONDS (7770) must exceed LEASE_SECONDS (9000)'],
    };
    assert.deepEqual(retentionGateKept(outcomeOf([underLease])), []);
    assert.match(
      retentionGateKept(
        outcomeOf([{ ...underLease, problems: undefined }]),
      ).join('\n'),
      /not above LEASE_SECONDS 9000/,
    );
  });
});
