/**
 * deploy.sh --dry-run: one gcloud command per step, in order, none run; what each deploys. Needs no account and no network: gcloud runs under a throwaway configuration.
 * The shared harness: `test/fixtures/deploy-harness.ts`. The jobs come from fixture modules
 * (`JOBS_MODULE`), never from a user's src/jobs.ts.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fieldConfigs, INDEXES } from '../../src/ops/indexes.ts';
import { validateJobs } from '../../src/policy/job-declaration.ts';
import {
  AWKWARD,
  argvOf,
  CATCH_UP_JOBS,
  CHANNEL,
  command,
  deploy,
  flag,
  gcloudDict,
  REQUIRED,
} from '../fixtures/deploy-harness.ts';
import { jobs as starterJobs } from '../fixtures/starter/src/jobs.ts';

describe('deploy.sh --dry-run', () => {
  it('creates a log-based metric per kind of run from a file that labels it by job, and no alert without ALERT_CHANNELS', () => {
    const run = deploy(AWKWARD);

    assert.equal(run.status, 0, run.stderr);
    const creates = run.lines
      .map(argvOf)
      .filter((a) => a[1] === 'logging' && a[3] === 'create');
    assert.deepEqual(
      creates.map((a) => a[4]),
      [
        'processed',
        'duplicates',
        'failed',
        'failed-after-retries',
        'missed',
        'late',
        'skipped',
        'paused',
        'lease-lost',
      ].map((k) => `scheduler-run-once-runs-${k}`),
    );
    const file = flag(creates[4] ?? [], '--config-from-file') ?? '';
    const metric = JSON.parse(readFileSync(file, 'utf8')) as Record<
      string,
      unknown
    >;
    assert.match(
      String(metric.filter),
      /service_name="scheduler-run-once" AND jsonPayload\.message="missed run"/,
    );
    assert.deepEqual(metric.labelExtractors, {
      job: 'REGEXP_EXTRACT(jsonPayload.jobName, "([^/]+)$")',
    });
    const late = JSON.parse(
      readFileSync(flag(creates[5] ?? [], '--config-from-file') ?? '', 'utf8'),
    ) as Record<string, unknown>;
    assert.match(
      String(late.filter),
      /service_name="scheduler-run-once" AND jsonPayload\.message="late run"$/,
    );
    assert.equal(
      run.lines.some((l) => l.includes('monitoring policies')),
      false,
    );
  });

  it('creates the dashboard of those metrics only if none has its name', () => {
    const run = deploy(AWKWARD);
    const again = deploy(AWKWARD, ['--dry-run', '--assume-existing']);

    assert.equal(run.status, 0, run.stderr);
    const list = command(
      run.lines,
      'gcloud',
      'monitoring',
      'dashboards',
      'list',
    );
    assert.equal(
      flag(list, '--filter'),
      'displayName="scheduler-run-once: runs by job"',
    );
    const create = command(
      run.lines,
      'gcloud',
      'monitoring',
      'dashboards',
      'create',
    );
    const board = JSON.parse(
      readFileSync(flag(create, '--config-from-file') ?? '', 'utf8'),
    ) as {
      displayName: string;
      gridLayout: {
        widgets: { xyChart?: { dataSets: { timeSeriesQuery: unknown }[] } }[];
      };
    };
    assert.equal(board.displayName, 'scheduler-run-once: runs by job');
    assert.equal(
      board.gridLayout.widgets.filter((w) => w.xyChart !== undefined).length,
      8,
    );
    assert.equal(again.status, 0, again.stderr);
    assert.ok(
      again.lines.some((l) =>
        l.startsWith('gcloud monitoring dashboards list'),
      ),
    );
    assert.equal(
      again.lines.some((l) =>
        l.startsWith('gcloud monitoring dashboards create'),
      ),
      false,
    );
    assert.match(
      again.stderr,
      /dashboard "scheduler-run-once: runs by job" exists: kept/,
    );
  });

  it('with ALERT_CHANNELS creates the alert policies once, with an absence alert per job that fits 23.5 h', () => {
    const run = deploy({ ...AWKWARD, ALERT_CHANNELS: CHANNEL });
    const again = deploy({ ...AWKWARD, ALERT_CHANNELS: CHANNEL }, [
      '--dry-run',
      '--assume-existing',
    ]);

    assert.equal(run.status, 0, run.stderr);
    const creates = run.lines
      .map(argvOf)
      .filter(
        (a) => a.slice(1, 5).join(' ') === 'alpha monitoring policies create',
      );
    const policies = creates.map(
      (a) =>
        JSON.parse(
          readFileSync(flag(a, '--policy-from-file') ?? '', 'utf8'),
        ) as {
          displayName: string;
          notificationChannels: string[];
          conditions: {
            conditionAbsent?: { duration: string; filter: string };
          }[];
        },
    );
    assert.deepEqual(
      policies.map((p) => p.displayName),
      [
        'scheduler-run-once: a run was missed or failed after every retry',
        'scheduler-run-once: a lease was lost (a job may have run twice)',
        'scheduler-run-once: no processed run of every-five for 600 s',
      ],
    );
    assert.ok(policies.every((p) => p.notificationChannels[0] === CHANNEL));
    assert.match(
      policies[2]?.conditions[0]?.conditionAbsent?.filter ?? '',
      /metric\.label\.job="every-five"/,
    );
    assert.match(
      run.stderr,
      /no absence alert for nightly_report-1: .*past the 23\.5 h/,
    );
    assert.ok(
      again.lines.some((l) =>
        l.startsWith('gcloud alpha monitoring policies list'),
      ),
      'looks for each policy by name before creating it',
    );
  });
  it('prints one gcloud command per step, in order, and runs no gcloud', () => {
    const run = deploy(REQUIRED);

    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(run.gcloudCalls, []);
    const steps = [
      ['services', 'enable'],
      ['firestore', 'databases', 'describe'],
      ['iam', 'service-accounts', 'create', 'scheduler-run-once-run'],
      ['projects', 'add-iam-policy-binding', 'my-project'],
      ['iam', 'service-accounts', 'create', 'scheduler-run-once-invoker'],
      ['firestore', 'fields', 'ttls', 'update', 'expire_at'],
      ['functions', 'deploy', 'scheduler-run-once'],
      ['functions', 'describe', 'scheduler-run-once'],
      ['functions', 'add-invoker-policy-binding', 'scheduler-run-once'],
      ['scheduler', 'jobs', 'create', 'http', 'scheduled-job'],
      ['scheduler', 'jobs', 'list'],
    ];
    const argvs = run.lines.map(argvOf);
    for (const argv of argvs) {
      assert.equal(argv[0], 'gcloud', argv.join(' '));
    }
    const positions = steps.map((step) =>
      argvs.findIndex((argv) => step.every((word, i) => argv[i + 1] === word)),
    );
    assert.ok(
      !positions.includes(-1),
      `missing a step: ${JSON.stringify(positions)}`,
    );
    assert.deepEqual(
      positions,
      [...positions].sort((a, b) => a - b),
    );
  });

  it('grants the runtime account roles/datastore.user only, unconditionally', () => {
    const run = deploy(REQUIRED);

    const bindings = run.lines
      .map(argvOf)
      .filter((argv) => argv[2] === 'add-iam-policy-binding');
    assert.equal(bindings.length, 1);
    const binding = bindings[0] as string[];
    assert.equal(
      flag(binding, '--member'),
      'serviceAccount:scheduler-run-once-run@my-project.iam.gserviceaccount.com',
    );
    assert.equal(flag(binding, '--role'), 'roles/datastore.user');
    assert.equal(flag(binding, '--condition'), 'None');
  });

  it('with a job declaring catchUp lets the runtime account invoke the function, and says why', () => {
    const run = deploy({ ...REQUIRED, JOBS_MODULE: CATCH_UP_JOBS });
    const without = deploy(REQUIRED);

    assert.equal(run.status, 0, run.stderr);
    const runtime =
      'serviceAccount:scheduler-run-once-run@my-project.iam.gserviceaccount.com';
    const invoker =
      'serviceAccount:scheduler-run-once-invoker@my-project.iam.gserviceaccount.com';
    const invokerBindings = (lines: string[]) =>
      lines
        .map(argvOf)
        .filter(
          (a) => a[1] === 'functions' && a[2] === 'add-invoker-policy-binding',
        )
        .map((a) => flag(a, '--member'));
    assert.deepEqual(invokerBindings(run.lines), [invoker, runtime]);
    assert.deepEqual(invokerBindings(without.lines), [invoker]);
    assert.match(
      run.stderr,
      /==> Letting scheduler-run-once-run@my-project\.iam\.gserviceaccount\.com invoke scheduler-run-once \(roles\/run\.invoker[^\n]*\n\s+every-minute declares catchUp, so the run audit delivers late slots to the function\n\s+itself, with an ID token of the runtime account\n/,
    );
    assert.match(
      run.stderr,
      /Runs as +scheduler-run-once-run@my-project\.iam\.gserviceaccount\.com \(roles\/datastore\.user, roles\/run\.invoker on the function: catch-up of every-minute\)/,
    );
    assert.doesNotMatch(without.stderr, /catch-up|catchUp/);
    const env = gcloudDict(
      flag(
        command(run.lines, 'gcloud', 'functions', 'deploy'),
        '--set-env-vars',
      ) ?? '',
    );
    assert.equal(
      env.has('OIDC_INVOKERS'),
      false,
      'platform mode: Cloud Run checks',
    );
  });

  it('with catchUp under AUTH_MODE=verify-oidc also lets the runtime account in through OIDC_INVOKERS, after the invoker', () => {
    const run = deploy({
      ...REQUIRED,
      JOBS_MODULE: CATCH_UP_JOBS,
      AUTH_MODE: 'verify-oidc',
    });

    assert.equal(run.status, 0, run.stderr);
    const env = gcloudDict(
      flag(
        command(run.lines, 'gcloud', 'functions', 'deploy'),
        '--set-env-vars',
      ) ?? '',
    );
    assert.equal(
      env.get('OIDC_INVOKERS'),
      'scheduler-run-once-invoker@my-project.iam.gserviceaccount.com,scheduler-run-once-run@my-project.iam.gserviceaccount.com',
    );
    assert.match(run.stderr, /runtime account \(also in OIDC_INVOKERS\)/);
  });

  it('deploys a private 2nd gen HTTP function from the repository root', () => {
    const run = deploy(REQUIRED);

    const argv = command(run.lines, 'gcloud', 'functions', 'deploy');
    for (const word of [
      '--gen2',
      '--trigger-http',
      '--no-allow-unauthenticated',
      '--source=.',
    ]) {
      assert.ok(argv.includes(word), `${word} missing`);
    }
    assert.equal(flag(argv, '--entry-point'), 'handleScheduledJob');
    assert.equal(flag(argv, '--runtime'), 'nodejs24');
    assert.equal(flag(argv, '--region'), 'us-central1');
    assert.equal(flag(argv, '--timeout'), '180s');
    assert.equal(
      flag(argv, '--service-account'),
      'scheduler-run-once-run@my-project.iam.gserviceaccount.com',
    );
  });

  it('passes the runtime configuration as env vars, commas and quotes included', () => {
    const run = deploy(AWKWARD);

    const env = gcloudDict(
      flag(
        command(run.lines, 'gcloud', 'functions', 'deploy'),
        '--set-env-vars',
      ) ?? '',
    );
    assert.deepEqual(Object.fromEntries(env), {
      NODE_ENV: 'production',
      GOOGLE_CLOUD_PROJECT: 'my-project',
      LEASE_SECONDS: '300',
      RETENTION_SECONDS: '2592000',
      RUNS_COLLECTION: 'scheduler_runs',
      FIRESTORE_DATABASE: '(default)',
      RUN_KEY_SCOPE: AWKWARD.RUN_KEY_SCOPE,
      LOG_LEVEL: 'info',
      JOB_TIMEOUT_SECONDS: '180',
      FIRESTORE_TIMEOUT_SECONDS: '20',
      RUN_KEY_SCOPE_HEADERS: 'X-Tenant',
      RUN_KEY_SCOPE_PARAMS: 'env',
    });
  });

  it('passes the OpenTelemetry variables through only with OTEL_TRACES_EXPORTER set, never the headers', () => {
    const otel = {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'https://telemetry.googleapis.com',
      OTEL_RESOURCE_ATTRIBUTES: 'team=data,tier=batch',
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer secret',
    };
    const envOf = (run: ReturnType<typeof deploy>) =>
      Object.fromEntries(
        gcloudDict(
          flag(
            command(run.lines, 'gcloud', 'functions', 'deploy'),
            '--set-env-vars',
          ) ?? '',
        ),
      );

    const traced = deploy({
      ...REQUIRED,
      ...otel,
      OTEL_TRACES_EXPORTER: 'otlp',
    });
    const untraced = deploy({ ...REQUIRED, ...otel });

    assert.equal(traced.status, 0, traced.stderr);
    const env = envOf(traced);
    assert.equal(env.OTEL_TRACES_EXPORTER, 'otlp');
    assert.equal(
      env.OTEL_EXPORTER_OTLP_ENDPOINT,
      otel.OTEL_EXPORTER_OTLP_ENDPOINT,
    );
    assert.equal(env.OTEL_RESOURCE_ATTRIBUTES, otel.OTEL_RESOURCE_ATTRIBUTES);
    assert.equal(env.OTEL_EXPORTER_OTLP_HEADERS, undefined);
    assert.doesNotMatch(traced.stdout, /Bearer secret/);
    assert.equal(untraced.status, 0, untraced.stderr);
    assert.deepEqual(
      Object.keys(envOf(untraced)).filter((name) => name.startsWith('OTEL_')),
      [],
    );
  });

  it('with AUTH_MODE=verify-oidc turns the invoker IAM check off and gives the function its audience', () => {
    const run = deploy({ ...REQUIRED, AUTH_MODE: 'verify-oidc' });

    const env = gcloudDict(
      flag(
        command(run.lines, 'gcloud', 'functions', 'deploy'),
        '--set-env-vars',
      ) ?? '',
    );
    const audience =
      'https://us-central1-my-project.cloudfunctions.net/scheduler-run-once';
    assert.equal(env.get('AUTH_MODE'), 'verify-oidc');
    assert.equal(env.get('OIDC_AUDIENCE'), audience);
    assert.equal(
      env.get('OIDC_INVOKERS'),
      'scheduler-run-once-invoker@my-project.iam.gserviceaccount.com',
    );
    const update = command(run.lines, 'gcloud', 'run', 'services', 'update');
    assert.ok(update.includes('--no-invoker-iam-check'), update.join(' '));
    const job = command(run.lines, 'gcloud', 'scheduler', 'jobs', 'create');
    assert.equal(flag(job, '--oidc-token-audience'), audience);
  });

  it('by default keeps the invoker IAM check and uses the function URL as the audience', () => {
    const run = deploy(REQUIRED);

    assert.ok(
      !run.lines.some((l) => l.startsWith('gcloud run services update')),
    );
    const job = command(run.lines, 'gcloud', 'scheduler', 'jobs', 'create');
    assert.equal(
      flag(job, '--oidc-token-audience'),
      'https://FUNCTION_URL.invalid',
    );
  });

  it('scopes run ids to project and region unless RUN_KEY_SCOPE says otherwise', () => {
    const run = deploy(REQUIRED);

    const env = gcloudDict(
      flag(
        command(run.lines, 'gcloud', 'functions', 'deploy'),
        '--set-env-vars',
      ) ?? '',
    );
    assert.equal(env.get('RUN_KEY_SCOPE'), 'my-project/us-central1');
  });

  it('creates one Scheduler job per declared job, each with its own schedule, zone and settings', () => {
    const run = deploy(AWKWARD);

    const creates = run.lines
      .map(argvOf)
      .filter(
        (argv) => argv.slice(1, 5).join(' ') === 'scheduler jobs create http',
      );
    assert.deepEqual(
      creates.map((argv) => argv[5]),
      ['every-five', 'nightly_report-1'],
    );
    const [everyFive, nightly] = creates as [string[], string[]];
    const settings = (argv: string[]) =>
      [
        '--schedule',
        '--time-zone',
        '--attempt-deadline',
        '--max-retry-attempts',
        '--max-retry-duration',
        '--min-backoff',
        '--max-backoff',
        '--max-doublings',
      ].map((name) => flag(argv, name));
    assert.deepEqual(settings(everyFive), [
      '*/5 * * * *',
      'Etc/UTC',
      '180s',
      '3',
      '3600s',
      '30s',
      '600s',
      '5',
    ]);
    assert.deepEqual(settings(nightly), [
      '0 9 * JAN-MAR MON-FRI',
      'America/New_York',
      '120s',
      '5',
      '0s',
      '10s',
      '300s',
      '3',
    ]);
    for (const argv of creates) {
      assert.equal(flag(argv, '--location'), 'us-central1');
      assert.equal(
        flag(argv, '--uri'),
        'https://FUNCTION_URL.invalid?env=prod&x=1',
      );
      assert.equal(
        flag(argv, '--oidc-token-audience'),
        'https://FUNCTION_URL.invalid',
      );
      assert.equal(
        flag(argv, '--oidc-service-account-email'),
        'scheduler-run-once-invoker@my-project.iam.gserviceaccount.com',
      );
      assert.equal(flag(argv, '--http-method'), 'POST');
      assert.equal(flag(argv, '--headers'), 'X-Tenant=acme corp');
    }
  });

  it("deploys src/jobs.ts's declarations when JOBS_MODULE is unset", () => {
    const { JOBS_MODULE: _, ...inputs } = REQUIRED;

    const run = deploy(inputs);

    assert.equal(run.status, 0, run.stderr);
    const created = run.lines
      .map(argvOf)
      .filter(
        (argv) => argv.slice(1, 5).join(' ') === 'scheduler jobs create http',
      )
      .map((argv) => [
        argv[5],
        flag(argv, '--schedule'),
        flag(argv, '--time-zone'),
      ]);
    assert.deepEqual(
      created,
      validateJobs(starterJobs).map((job) => [
        job.id,
        job.schedule,
        job.timeZone,
      ]),
    );
  });

  it('lists the Scheduler jobs that call the function, to find undeclared ones', () => {
    const run = deploy(REQUIRED);

    const list = command(run.lines, 'gcloud', 'scheduler', 'jobs', 'list');
    assert.equal(flag(list, '--location'), 'us-central1');
    assert.equal(
      flag(list, '--filter'),
      'httpTarget.uri~"^https://FUNCTION_URL[.]invalid/?([?]|$)"',
    );
    assert.equal(flag(list, '--format'), 'value(name.basename())');
    assert.match(
      run.stderr,
      /not declared\n {2}not checked in a dry run \(it lists no Scheduler job\)/,
    );
  });

  it('reports a job that calls the function but is not declared, and keeps it', () => {
    const run = deploy(REQUIRED, ['--dry-run', '--assume-existing']);

    assert.ok(
      !run.lines.some((l) => l.startsWith('gcloud scheduler jobs delete')),
      run.stdout,
    );
    assert.match(
      run.stderr,
      /UNDECLARED-JOB: calls scheduler-run-once but is not declared \(removed, or renamed\)/,
    );
    assert.match(
      run.stderr,
      /its history stays readable: npm run runs -- --job UNDECLARED-JOB/,
    );
    assert.match(run.stderr, /delete it: \.\/deploy\.sh --prune/);
    assert.match(
      run.stderr,
      /Not declared {4}UNDECLARED-JOB \(kept: --prune deletes them/,
    );
  });

  it('creates the TTL policy of the per-job documents and every composite index the queries need', () => {
    const run = deploy(REQUIRED);

    assert.equal(run.status, 0, run.stderr);
    const ttls = run.lines
      .map(argvOf)
      .filter(
        (a) => a.slice(1, 5).join(' ') === 'firestore fields ttls update',
      );
    assert.deepEqual(
      ttls.map((a) => flag(a, '--collection-group')),
      ['scheduler_runs', 'scheduler_runs_jobs'],
    );
    const indexes = run.lines
      .map(argvOf)
      .filter(
        (a) => a.slice(1, 5).join(' ') === 'firestore indexes composite create',
      );
    assert.deepEqual(
      indexes.map((a) => a.filter((w) => w.startsWith('--field-config='))),
      INDEXES.map(fieldConfigs),
    );
    assert.ok(
      indexes.every((a) => flag(a, '--collection-group') === 'scheduler_runs'),
    );
  });

  it('names a declared job that has no Scheduler job yet', () => {
    const run = deploy(REQUIRED);

    assert.match(
      run.stderr,
      /scheduled-job has no Scheduler job yet: deploy\.sh \(without --dry-run\) creates it/,
    );
    assert.match(
      run.stderr,
      /New {13}scheduled-job \(had no Scheduler job: would be created\)/,
    );
  });

  it('with --prune deletes the jobs that are not declared, and only those', () => {
    const run = deploy(AWKWARD, ['--dry-run', '--assume-existing', '--prune']);

    const deletes = run.lines
      .map(argvOf)
      .filter((argv) => argv.slice(1, 4).join(' ') === 'scheduler jobs delete');
    assert.deepEqual(deletes, [
      [
        'gcloud',
        'scheduler',
        'jobs',
        'delete',
        'UNDECLARED-JOB',
        '--location=us-central1',
        '--project=my-project',
        '--quiet',
      ],
    ]);
  });

  it('with --assume-existing prints the update path and creates nothing', () => {
    const run = deploy(AWKWARD, ['--dry-run', '--assume-existing']);

    assert.equal(run.status, 0, run.stderr);
    assert.ok(!run.lines.some((l) => / create /.test(l)), run.stdout);
    assert.ok(!run.lines.some((l) => /ttls update/.test(l)), run.stdout);
    const update = command(
      run.lines,
      'gcloud',
      'scheduler',
      'jobs',
      'update',
      'http',
      'nightly_report-1',
    );
    assert.equal(flag(update, '--update-headers'), 'X-Tenant=acme corp');
    assert.equal(flag(update, '--schedule'), '0 9 * JAN-MAR MON-FRI');
    command(
      run.lines,
      'gcloud',
      'scheduler',
      'jobs',
      'update',
      'http',
      'every-five',
    );
  });

  it('ends with how to trigger a run, what a forced run does, and npm run trigger', () => {
    const run = deploy(REQUIRED);

    assert.match(
      run.stderr,
      /gcloud scheduler jobs run scheduled-job --location=us-central1/,
    );
    assert.match(
      run.stderr,
      /forced run carries the \*next\* schedule time; [\s\S]*the scheduled run still runs/,
    );
    assert.match(
      run.stderr,
      /npm run trigger -- scheduled-job --url=https:\/\/FUNCTION_URL\.invalid --invoker=scheduler-run-once-invoker@my-project\.iam\.gserviceaccount\.com/,
    );
  });
});
