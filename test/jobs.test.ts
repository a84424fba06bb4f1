/**
 * Your jobs' declarations, checked as the function checks them at its cold start: a bad schedule,
 * a duplicated id or a setting out of range fails here, not after a deploy. Run: `npm run test:jobs`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { validateJobs } from 'scheduler-run-once';
import { jobs } from '../src/jobs.ts';

describe('src/jobs.ts', () => {
  it('declares jobs the function accepts', () => {
    const declared = validateJobs(jobs);
    assert.equal(declared.length, jobs.length);
  });
});
