/**
 * deploy.sh on a project, gcloud faked: what it creates, what it finds on a second run, what --prune deletes; and its source is shellcheck clean. Needs no account and no network: gcloud runs under a throwaway configuration.
 * The shared harness: `test/fixtures/deploy-harness.ts`. The jobs come from fixture modules
 * (`JOBS_MODULE`), never from a user's src/jobs.ts.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import {
  callsOf,
  cloudGcloud,
  DEPLOY,
  deploy,
  FUNCTION_URL,
  flag,
  HAS_SHELLCHECK,
  NO_STDIN,
  REQUIRED,
  TWO_JOBS,
} from '../fixtures/deploy-harness.ts';

describe('deploy.sh on a project (gcloud faked)', () => {
  it('creates what is missing and points the job at the function URL', () => {
    const cloud = cloudGcloud();

    const run = deploy(REQUIRED, [], cloud);

    assert.equal(run.status, 0, run.stderr);
    assert.equal(
      callsOf(run.gcloudCalls, 'gcloud', 'iam', 'service-accounts', 'create')
        .length,
      2,
    );
    assert.deepEqual(
      callsOf(
        run.gcloudCalls,
        'gcloud',
        'firestore',
        'fields',
        'ttls',
        'update',
      ).map((argv) => flag(argv, '--collection-group')),
      ['scheduler_runs', 'scheduler_runs_jobs'],
      'the runs and the per-job documents',
    );
    const [job] = callsOf(
      run.gcloudCalls,
      'gcloud',
      'scheduler',
      'jobs',
      'create',
      'http',
    );
    assert.ok(job, 'no job created');
    assert.equal(flag(job, '--uri'), FUNCTION_URL);
    assert.equal(flag(job, '--oidc-token-audience'), FUNCTION_URL);
    assert.match(run.stdout, /gcloud scheduler jobs run scheduled-job/);
  });

  it('updates in place when run again, creating nothing', () => {
    const cloud = cloudGcloud();
    assert.equal(
      deploy({ ...REQUIRED, JOBS_MODULE: TWO_JOBS }, [], cloud).status,
      0,
    );

    const again = deploy({ ...REQUIRED, JOBS_MODULE: TWO_JOBS }, [], cloud);

    assert.equal(again.status, 0, again.stderr);
    assert.deepEqual(
      again.gcloudCalls
        .filter((argv) => argv.includes('create'))
        .map((argv) => argv.join(' ')),
      [],
    );
    assert.equal(
      callsOf(
        again.gcloudCalls,
        'gcloud',
        'firestore',
        'fields',
        'ttls',
        'update',
      ).length,
      0,
    );
    assert.equal(
      callsOf(again.gcloudCalls, 'gcloud', 'functions', 'deploy').length,
      1,
    );
    const updates = callsOf(
      again.gcloudCalls,
      'gcloud',
      'scheduler',
      'jobs',
      'update',
      'http',
    );
    assert.deepEqual(
      updates.map((argv) => [
        argv[5],
        flag(argv, '--schedule'),
        flag(argv, '--uri'),
      ]),
      [
        ['every-five', '*/5 * * * *', FUNCTION_URL],
        ['nightly_report-1', '0 9 * JAN-MAR MON-FRI', FUNCTION_URL],
      ],
    );
  });

  it('reports the jobs no longer declared and deletes them only with --prune', () => {
    const cloud = cloudGcloud();
    assert.equal(
      deploy({ ...REQUIRED, JOBS_MODULE: TWO_JOBS }, [], cloud).status,
      0,
    );

    const kept = deploy(REQUIRED, [], cloud);
    const pruned = deploy(REQUIRED, ['--prune'], cloud);
    const after = deploy(REQUIRED, [], cloud);

    assert.equal(kept.status, 0, kept.stderr);
    assert.match(
      kept.stderr,
      /every-five: calls scheduler-run-once but is not declared \(removed, or renamed to scheduled-job\?\)/,
    );
    assert.match(
      kept.stderr,
      /nightly_report-1: calls scheduler-run-once but is not declared/,
    );
    assert.deepEqual(
      callsOf(kept.gcloudCalls, 'gcloud', 'scheduler', 'jobs', 'delete'),
      [],
    );
    assert.equal(pruned.status, 0, pruned.stderr);
    assert.deepEqual(
      callsOf(pruned.gcloudCalls, 'gcloud', 'scheduler', 'jobs', 'delete').map(
        (argv) => argv[4],
      ),
      ['every-five', 'nightly_report-1'],
    );
    assert.match(
      after.stderr,
      /not declared\n\+ gcloud scheduler jobs list .*\n {2}none\n/,
    );
  });

  it('stops before creating anything when the Firestore database is missing', () => {
    const run = deploy(REQUIRED, [], cloudGcloud('exit 1'));

    assert.equal(run.status, 1);
    assert.match(
      run.stderr,
      /Firestore database \(default\) not found.*\n.*gcloud firestore databases create/,
    );
    assert.deepEqual(
      run.gcloudCalls.map((argv) => argv.slice(1, 3).join(' ')),
      ['services enable', 'firestore databases'],
    );
  });

  it('refuses a database in Datastore mode', () => {
    const run = deploy(REQUIRED, [], cloudGcloud('echo DATASTORE_MODE'));

    assert.equal(run.status, 1);
    assert.match(run.stderr, /DATASTORE_MODE, not FIRESTORE_NATIVE/);
  });
});

describe('deploy.sh source', () => {
  it('is shellcheck clean', {
    skip:
      !HAS_SHELLCHECK &&
      'shellcheck is not installed (apt-get install shellcheck)',
  }, () => {
    const result = spawnSync('shellcheck', [DEPLOY], {
      encoding: 'utf8',
      stdio: NO_STDIN,
    });

    assert.equal(result.status, 0, result.stdout + result.stderr);
  });
});
