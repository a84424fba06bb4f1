/**
 * deploy.sh refuses bad inputs before any command, and grants a proxy example's roles only when asked (EXAMPLE). Needs no account and no network: gcloud runs under a throwaway configuration.
 * The shared harness: `test/fixtures/deploy-harness.ts`. The jobs come from fixture modules
 * (`JOBS_MODULE`), never from a user's src/jobs.ts.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import {
  argvOf,
  command,
  deploy,
  FIXTURES,
  fakeNode,
  flag,
  HAS_GCLOUD,
  NO_ACCOUNT,
  NO_GCLOUD,
  ONE_JOB,
  parseAll,
  REQUIRED,
  scratch,
  TWO_JOBS,
} from '../fixtures/deploy-harness.ts';
import {
  STARTER_CHECKS_SKIP,
  STARTER_ROOT,
} from '../fixtures/starter-checkout.ts';

describe('deploy.sh refuses bad inputs before any command', () => {
  const INVALID_JOBS = path.join(FIXTURES, 'jobs-invalid.ts');
  const cases: {
    name: string;
    inputs: Record<string, string>;
    says: RegExp[];
  }[] = [
    {
      name: 'job declarations with an App Engine (groc) schedule, a repeated id and an unknown zone',
      inputs: { ...REQUIRED, JOBS_MODULE: INVALID_JOBS },
      says: [
        /jobs-invalid\.ts: job "groc" \(jobs\[0\]\): schedule "every 5 minutes" must be a unix-cron schedule/,
        /X-CloudScheduler-ScheduleTime/,
        /jobs-invalid\.ts: job "groc" \(jobs\[1\]\): id "groc" is already declared by jobs\[0\]/,
        /timeZone "Mars\/Base" is not a time zone of the tz database/,
      ],
    },
    {
      name: 'a schedule still given as SCHEDULE',
      inputs: {
        ...REQUIRED,
        SCHEDULE: '*/5 * * * *',
        ATTEMPT_DEADLINE_SECONDS: '60',
      },
      says: [
        /SCHEDULE is set, but deploy.sh no longer reads it: declare the job's schedule in code/,
        /ATTEMPT_DEADLINE_SECONDS is set, .* declare the job's attemptDeadlineSeconds in code/,
      ],
    },
    {
      name: 'a Node.js too old to read the declarations',
      inputs: { ...REQUIRED, NODE_BIN: fakeNode('20.19.0') },
      says: [
        /with Node.js 22.18 or later .*is 20.19.0: put a newer node first on PATH/,
      ],
    },
    {
      name: 'no Node.js to read the declarations',
      inputs: { ...REQUIRED, NODE_BIN: path.join(scratch, 'no-such-node') },
      says: [
        /with Node.js 22.18 or later, and .*no-such-node' did not run: install Node.js/,
      ],
    },
    {
      name: 'a NODE_BIN that runs nothing and prints nothing',
      inputs: { ...REQUIRED, NODE_BIN: '/bin/true' },
      says: [
        /with Node.js 22.18 or later, and '\/bin\/true' did not run: install Node.js/,
      ],
    },
    {
      name: 'a Node.js 23 before 23.6 (no type stripping without a flag)',
      inputs: { ...REQUIRED, NODE_BIN: fakeNode('23.5.0') },
      says: [
        /with Node.js 22.18 or later .*is 23.5.0: put a newer node first on PATH/,
      ],
    },
    {
      name: 'job declarations that print to stdout as they load',
      inputs: {
        ...REQUIRED,
        JOBS_MODULE: path.join(FIXTURES, 'jobs-stdout.ts'),
      },
      says: [
        /printed a line that is not a job's: 'loading the jobs'; does .*jobs-stdout\.ts, or a module it imports, print to stdout as it loads\? Print to stderr/,
        /printed a line that is not a job's: \$'a\\tline\\twith\\ttabs'/,
      ],
    },
    {
      name: 'a lease longer than the function accepts (a day)',
      inputs: { ...REQUIRED, LEASE_SECONDS: '86401' },
      says: [/LEASE_SECONDS.*86401.*86400/],
    },
    {
      name: 'an alert channel that is not a channel name',
      inputs: { ...REQUIRED, ALERT_CHANNELS: 'ops@example.com' },
      says: [/ALERT_CHANNELS.*projects\/PROJECT\/notificationChannels\/ID/],
    },
    {
      name: 'a lease shorter than the function timeout',
      inputs: { ...REQUIRED, LEASE_SECONDS: '120' },
      says: [
        /LEASE_SECONDS \(120\) must be at least FUNCTION_TIMEOUT_SECONDS \(180\)/,
      ],
    },
    {
      name: "a function timeout below each job's attempt deadline",
      inputs: {
        ...REQUIRED,
        JOBS_MODULE: TWO_JOBS,
        FUNCTION_TIMEOUT_SECONDS: '100',
      },
      says: [
        /FUNCTION_TIMEOUT_SECONDS \(100\) must be at least the attemptDeadlineSeconds \(180\) of job every-five/,
        /FUNCTION_TIMEOUT_SECONDS \(100\) must be at least the attemptDeadlineSeconds \(120\) of job nightly_report-1/,
      ],
    },
    {
      name: 'a function timeout over 3600 s',
      inputs: {
        ...REQUIRED,
        FUNCTION_TIMEOUT_SECONDS: '3601',
        LEASE_SECONDS: '4000',
      },
      says: [/FUNCTION_TIMEOUT_SECONDS='3601'.* from 1 to 3600/],
    },
    {
      name: "a retention that a job's late retry could outlive",
      inputs: { ...REQUIRED, RETENTION_SECONDS: '3600' },
      says: [
        /RETENTION_SECONDS \(3600\) must exceed the retry window of job scheduled-job plus its forced-run tolerance \(3630 s: 3570 s/,
      ],
    },
    {
      name: 'a retention below the delay missed-run detection judges a slot at',
      inputs: { ...REQUIRED, RETENTION_SECONDS: '7000' },
      says: [
        /RETENTION_SECONDS \(7000\) must exceed the judging delay of job scheduled-job plus its forced-run tolerance \(7800 s/,
      ],
    },
    {
      name: 'a retention checked against each job, with its own retry settings',
      inputs: { ...REQUIRED, JOBS_MODULE: TWO_JOBS, RETENTION_SECONDS: '1000' },
      says: [
        /the retry window of job every-five plus its forced-run tolerance \(3630 s/,
        /the retry window of job nightly_report-1 plus its forced-run tolerance \(1090 s/,
      ],
    },
    {
      name: 'a declared job that imports a package only in devDependencies',
      inputs: {
        ...REQUIRED,
        JOBS_MODULE: path.join(FIXTURES, 'jobs-dev-dependency.ts'),
      },
      says: [
        /examples\/workflows-proxy\/workflows-job\.ts imports @google-cloud\/workflows, which package\.json lists only in devDependencies.*npm install @google-cloud\/workflows/,
      ],
    },
    {
      name: 'an unknown AUTH_MODE',
      inputs: { ...REQUIRED, AUTH_MODE: 'none' },
      says: [/AUTH_MODE='none': must be platform .* or verify-oidc/],
    },
    {
      name: 'a missing GOOGLE_CLOUD_PROJECT',
      inputs: { REGION: 'us-central1', JOBS_MODULE: ONE_JOB },
      says: [/GOOGLE_CLOUD_PROJECT is required/],
    },
    {
      name: 'several missing and invalid inputs and declarations, listed at once',
      inputs: {
        LEASE_SECONDS: 'soon',
        RUNTIME_SA_NAME: 'x',
        JOBS_MODULE: INVALID_JOBS,
      },
      says: [
        /GOOGLE_CLOUD_PROJECT is required/,
        /REGION is required/,
        /LEASE_SECONDS='soon'/,
        /RUNTIME_SA_NAME='x'/,
        /schedule "every 5 minutes"/,
      ],
    },
    {
      name: 'a scope header that the job would not send',
      inputs: { ...REQUIRED, RUN_KEY_SCOPE_HEADERS: 'x-tenant' },
      says: [/JOB_HEADERS must include 'x-tenant'/],
    },
  ];

  // A real run, gcloud faked: it stops before its first command. The checks do not depend on
  // --dry-run (deploy.sh validates first), which one dry run of each kind below shows.
  for (const { name, inputs, says } of cases) {
    it(`refuses ${name}`, () => {
      const run = deploy(inputs, []);

      assert.equal(run.status, 2, run.stderr);
      for (const message of says) {
        assert.match(run.stderr, message);
      }
      assert.doesNotMatch(run.stdout, /gcloud/);
      assert.deepEqual(run.gcloudCalls, []);
    });
  }

  it('refuses in a dry run as in a real run, with the same messages', () => {
    const { inputs } = cases[0] as (typeof cases)[number];
    const real = deploy(inputs, []);
    const dry = deploy(inputs, ['--dry-run']);

    assert.equal(dry.status, 2, dry.stderr);
    assert.equal(dry.stderr, real.stderr);
    assert.doesNotMatch(dry.stdout, /gcloud/);
  });

  it('refuses an unknown argument', () => {
    const run = deploy(REQUIRED, ['--dry-rum']);

    assert.equal(run.status, 2);
    assert.match(run.stderr, /unknown argument '--dry-rum'/);
    assert.deepEqual(run.gcloudCalls, []);
  });
});

describe('deploy.sh EXAMPLE: the roles of a proxy example (opt-in)', () => {
  const RUNTIME_MEMBER =
    'serviceAccount:scheduler-run-once-run@my-project.iam.gserviceaccount.com';
  /** Every IAM binding of a dry run: [command, resource, role], in order. */
  const bindingsOf = (lines: string[]) =>
    lines
      .map(argvOf)
      .filter(
        (argv) =>
          argv.includes('add-iam-policy-binding') && argv[1] !== 'functions',
      )
      .map((argv) => {
        assert.equal(flag(argv, '--member'), RUNTIME_MEMBER, argv.join(' '));
        const at = argv.indexOf('add-iam-policy-binding');
        return [
          argv.slice(1, at).join(' '),
          argv[at + 1],
          flag(argv, '--role'),
        ];
      });

  it('grants nothing beyond roles/datastore.user when EXAMPLE is unset', () => {
    const run = deploy(REQUIRED);

    assert.deepEqual(bindingsOf(run.lines), [
      ['projects', 'my-project', 'roles/datastore.user'],
    ]);
  });

  it('EXAMPLE=workflows grants roles/workflows.invoker on the project, unconditionally', () => {
    const run = deploy({ ...REQUIRED, EXAMPLE: 'workflows' });

    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(bindingsOf(run.lines), [
      ['projects', 'my-project', 'roles/datastore.user'],
      ['projects', 'my-project', 'roles/workflows.invoker'],
    ]);
    const invoker = run.lines
      .map(argvOf)
      .find((a) => a.includes('--role=roles/workflows.invoker'));
    assert.equal(flag(invoker ?? [], '--condition'), 'None');
    assert.match(
      run.stderr,
      /Runs as .*\(roles\/datastore\.user, roles\/workflows\.invoker\)/,
    );
  });

  it('EXAMPLE=cloud-run-job grants running with overrides and listing executions on that job only', () => {
    const run = deploy({
      ...REQUIRED,
      EXAMPLE: 'cloud-run-job',
      EXAMPLE_CLOUD_RUN_JOB: 'export',
    });

    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(bindingsOf(run.lines), [
      ['projects', 'my-project', 'roles/datastore.user'],
      ['run jobs', 'export', 'roles/run.jobsExecutorWithOverrides'],
      ['run jobs', 'export', 'roles/run.viewer'],
    ]);
    const onJob = command(
      run.lines,
      'gcloud',
      'run',
      'jobs',
      'add-iam-policy-binding',
    );
    assert.equal(flag(onJob, '--region'), 'us-central1');
    assert.equal(flag(onJob, '--project'), 'my-project');
  });

  it('EXAMPLE=cloud-build grants roles/cloudbuild.builds.editor on the project', () => {
    const run = deploy({ ...REQUIRED, EXAMPLE: 'cloud-build' });

    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(bindingsOf(run.lines), [
      ['projects', 'my-project', 'roles/datastore.user'],
      ['projects', 'my-project', 'roles/cloudbuild.builds.editor'],
    ]);
  });

  it('grants the example roles right after roles/datastore.user, before the function is deployed', () => {
    const run = deploy({
      ...REQUIRED,
      EXAMPLE: 'cloud-run-job',
      EXAMPLE_CLOUD_RUN_JOB: 'export',
    });

    const steps = run.lines.map((l) => argvOf(l).slice(1, 3).join(' '));
    const grant = steps.indexOf('run jobs');
    assert.equal(steps[grant - 1], 'projects add-iam-policy-binding');
    assert.ok(grant < steps.indexOf('functions deploy'));
  });

  const refused: {
    name: string;
    inputs: Record<string, string>;
    says: RegExp;
  }[] = [
    {
      name: 'an unknown example',
      inputs: { EXAMPLE: 'pubsub' },
      says: /EXAMPLE='pubsub': must be workflows, cloud-run-job or cloud-build/,
    },
    {
      name: 'EXAMPLE=cloud-run-job without the job',
      inputs: { EXAMPLE: 'cloud-run-job' },
      says: /EXAMPLE=cloud-run-job needs EXAMPLE_CLOUD_RUN_JOB, the name of the Cloud Run job in us-central1/,
    },
    {
      name: 'a Cloud Run job name that is not one',
      inputs: { EXAMPLE: 'cloud-run-job', EXAMPLE_CLOUD_RUN_JOB: 'Export_Job' },
      says: /needs EXAMPLE_CLOUD_RUN_JOB.*not 'Export_Job'/,
    },
    {
      name: 'EXAMPLE_CLOUD_RUN_JOB with another example',
      inputs: { EXAMPLE: 'workflows', EXAMPLE_CLOUD_RUN_JOB: 'export' },
      says: /EXAMPLE_CLOUD_RUN_JOB is set but EXAMPLE is workflows/,
    },
  ];
  for (const { name, inputs, says } of refused) {
    it(`refuses ${name} before any command`, () => {
      const run = deploy({ ...REQUIRED, ...inputs }, []);

      assert.equal(run.status, 2, run.stderr);
      assert.match(run.stderr, says);
      assert.deepEqual(run.gcloudCalls, []);
    });
  }

  it('refuses an example in a dry run as in a real run, with the same message', () => {
    const inputs = {
      ...REQUIRED,
      ...(refused[0] as (typeof refused)[number]).inputs,
    };
    const real = deploy(inputs, []);
    const dry = deploy(inputs, ['--dry-run']);

    assert.equal(dry.status, 2, dry.stderr);
    assert.equal(dry.stderr, real.stderr);
  });

  it('prints example commands that the real gcloud parser accepts', {
    skip: !HAS_GCLOUD && NO_GCLOUD,
  }, async () => {
    const lines = [
      ...deploy({ ...REQUIRED, EXAMPLE: 'workflows' }).lines,
      ...deploy({
        ...REQUIRED,
        EXAMPLE: 'cloud-run-job',
        EXAMPLE_CLOUD_RUN_JOB: 'export',
      }).lines,
      ...deploy({ ...REQUIRED, EXAMPLE: 'cloud-build' }).lines,
    ].filter(
      (line) =>
        line.includes('add-iam-policy-binding') &&
        !line.includes(' functions '),
    );

    const results = await parseAll([...new Set(lines)]);

    assert.equal(results.length, 5);
    const refused = results.filter(
      (r) => r.code !== 1 || !NO_ACCOUNT.test(r.stderr),
    );
    assert.deepEqual(
      refused.map((r) => `exit ${r.code}: ${r.line}\n${r.stderr.trim()}`),
      [],
    );
  });
});

describe("the starter's ./deploy.sh", () => {
  /** Runs the starter's deploy.sh in `dir` with `env` added; its status and stderr. */
  const starterDeploy = (dir: string, env: Record<string, string>) =>
    spawnSync('bash', [path.join(dir, 'deploy.sh'), '--dry-run'], {
      cwd: dir,
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '', ...REQUIRED, ...env },
      timeout: 60_000,
    });

  it('names a NODE_BIN that is no Node.js, before anything runs, and exits 2', {
    skip: STARTER_CHECKS_SKIP,
  }, () => {
    for (const nodeBin of [path.join(scratch, 'no-such-node'), scratch]) {
      const result = starterDeploy(STARTER_ROOT, { NODE_BIN: nodeBin });

      assert.equal(result.status, 2, result.stderr);
      assert.match(
        result.stderr,
        /^deploy\.sh: no Node\.js at '.+': install Node\.js 22\.18 or later, or set NODE_BIN=\/path\/to\/node\n$/,
      );
    }
  });

  it('says to run npm install in a project without node_modules, and exits 2', {
    skip: STARTER_CHECKS_SKIP,
  }, () => {
    const project = mkdtempSync(path.join(scratch, 'no-install-'));
    copyFileSync(
      path.join(STARTER_ROOT, 'deploy.sh'),
      path.join(project, 'deploy.sh'),
    );

    const result = starterDeploy(project, {});

    assert.equal(result.status, 2, result.stderr);
    assert.match(
      result.stderr,
      /^deploy\.sh: node_modules\/scheduler-run-once\/bin\/run-once\.cjs is missing: run npm install in .+no-install-.+ first\n$/,
    );
  });
});
