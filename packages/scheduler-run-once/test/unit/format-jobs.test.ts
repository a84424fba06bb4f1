/**
 * `npm run jobs`'s pure parts (`src/ops/format-jobs.ts`): `--count` and the JSON's local times.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  COUNT,
  jobsJson,
  parseCount,
  upcoming,
} from '../../src/ops/format-jobs.ts';
import { defineJob, validateJobs } from '../../src/policy/job-declaration.ts';

describe('parseCount', () => {
  it('reads a whole number from 1 to the maximum', () => {
    assert.deepEqual(['1', '10', String(COUNT.max)].map(parseCount), [
      1,
      10,
      COUNT.max,
    ]);
  });

  for (const bad of ['0', String(COUNT.max + 1), '-3', '2.5', 'ten', '']) {
    it(`refuses ${JSON.stringify(bad)} saying what to write`, () => {
      assert.throws(() => parseCount(bad), /from 1 to 1000, e\.g\. --count 10/);
    });
  }
});

describe('jobsJson', () => {
  it("keeps each next time's zone offset, which shows a daylight-saving change", () => {
    const jobs = validateJobs([
      defineJob({
        id: 'hourly',
        schedule: '0 * * * *',
        timeZone: 'Europe/Berlin',
        run: () => {},
      }),
    ]);

    const [job] = JSON.parse(
      jobsJson(upcoming(jobs, new Date('2026-03-28T23:30:00Z'), 3)),
    ) as {
      next: string[];
      nextLocal: string[];
    }[];

    assert.deepEqual(job?.next, [
      '2026-03-29T00:00:00Z',
      '2026-03-29T01:00:00Z',
      '2026-03-29T02:00:00Z',
    ]);
    assert.deepEqual(job?.nextLocal, [
      '2026-03-29T01:00:00+01:00',
      '2026-03-29T03:00:00+02:00',
      '2026-03-29T04:00:00+02:00',
    ]);
  });
});
