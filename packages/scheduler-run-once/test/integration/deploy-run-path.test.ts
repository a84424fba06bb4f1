/**
 * deploy.sh --run-deploy: the same deployment through `gcloud run deploy --function` (the Cloud Run
 * Admin API) as through the default `gcloud functions deploy --gen2`; every command it prints
 * accepted by the real gcloud parser; each path stopping, before it creates anything, at a function
 * of the other, with the command that moves it. Needs no account and no network: gcloud runs under
 * a throwaway configuration, or is faked. The shared harness: `test/fixtures/deploy-harness.ts`.
 * Kept apart from the default path's files (deploy-dry-run, deploy-project) so that each can change
 * alone; a dry run is made once per set of inputs (the harness reuses it).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, it } from 'node:test';
import {
  AWKWARD,
  argvOf,
  CATCH_UP_JOBS,
  CHANNEL,
  CHILD_TIMEOUT_MS,
  callsOf,
  cloudGcloud,
  command,
  DEPLOY,
  type DeployResult,
  deploy,
  distinctShapes,
  type FakeGcloud,
  FUNCTION_URL,
  fakeGcloud,
  flag,
  HAS_GCLOUD,
  NO_ACCOUNT,
  NO_GCLOUD,
  NO_STDIN,
  parseAll,
  REQUIRED,
} from '../fixtures/deploy-harness.ts';

const DRY_RUN_PATH = ['--dry-run', '--run-deploy'];
/** Every optional part at once: quoting, two kinds of jobs, catch-up, verify-oidc, alerts, the update path. */
const EVERYTHING = {
  ...AWKWARD,
  JOBS_MODULE: CATCH_UP_JOBS,
  AUTH_MODE: 'verify-oidc',
  ALERT_CHANNELS: CHANNEL,
};
const EVERYTHING_ARGS = ['--dry-run', '--assume-existing', '--prune'];

/**
 * The commands that differ between the two paths by design: the APIs enabled, the check for the
 * other path's function, and the function's deploy, URL, invoker bindings and invoker IAM check.
 * Every other printed command must be the same on both.
 */
function pathSpecific(argv: string[]): boolean {
  const [, group, verb] = argv;
  return (
    (group === 'services' && verb === 'enable') ||
    group === 'functions' ||
    (group === 'run' && (verb === 'deploy' || verb === 'services'))
  );
}

/** The printed commands that are not {@link pathSpecific}, in order. */
function sharedCommands(run: DeployResult): string[] {
  return run.lines.filter((line) => !pathSpecific(argvOf(line)));
}

/**
 * A project whose function was deployed through the Cloud Run Admin API: `gcloud functions
 * describe` finds nothing, `gcloud run services describe` finds the service once `gcloud run
 * deploy` created it. Everything else is {@link cloudGcloud}'s.
 */
function runAdminCloud(): FakeGcloud {
  const cloud = cloudGcloud();
  return fakeGcloud(`state=${JSON.stringify(cloud.bin)}
case "$1 $2 $3" in
  "functions describe "*) exit 1 ;;
  "run deploy "*) touch "$state/service"; exit 0 ;;
  "run services describe") [[ -e "$state/service" ]] && echo ${FUNCTION_URL}; exit ;;
esac
exec ${JSON.stringify(path.join(cloud.bin, 'gcloud'))} "$@"`);
}

/** The gcloud commands printed for the user to run: the indented lines of stderr that are one. */
function printedCommands(stderr: string): string[] {
  return stderr
    .split('\n')
    .filter((line) => /^ {2,}gcloud /.test(line))
    .map((line) => line.trim());
}

/** The words after the subcommand that name where and as whom: the same on both paths. */
function where(argv: string[]): (string | undefined)[] {
  return ['--region', '--project'].map((name) => flag(argv, name));
}

describe('deploy.sh --run-deploy --dry-run', () => {
  it('deploys through gcloud run deploy --function with the default path settings, flag by flag', () => {
    const runPath = deploy(REQUIRED, DRY_RUN_PATH);
    const functionsPath = deploy(REQUIRED);

    assert.equal(runPath.status, 0, runPath.stderr);
    assert.equal(functionsPath.status, 0, functionsPath.stderr);
    const runDeploy = command(
      runPath.lines,
      'gcloud',
      'run',
      'deploy',
      'scheduler-run-once',
    );
    const functionsDeploy = command(
      functionsPath.lines,
      'gcloud',
      'functions',
      'deploy',
      'scheduler-run-once',
    );
    assert.deepEqual(
      {
        function: flag(runDeploy, '--function'),
        baseImage: flag(runDeploy, '--base-image'),
        source: flag(runDeploy, '--source'),
        memory: flag(runDeploy, '--memory'),
        concurrency: flag(runDeploy, '--concurrency'),
        private: runDeploy.includes('--no-allow-unauthenticated'),
        iamCheckOff: runDeploy.includes('--no-invoker-iam-check'),
      },
      {
        function: flag(functionsDeploy, '--entry-point'),
        baseImage: flag(functionsDeploy, '--runtime'),
        source: '.',
        memory: '256Mi',
        concurrency: '1',
        private: true,
        iamCheckOff: false,
      },
    );
    for (const name of [
      '--region',
      '--project',
      '--service-account',
      '--timeout',
      '--set-env-vars',
    ]) {
      assert.equal(
        flag(runDeploy, name),
        flag(functionsDeploy, name),
        `${name} differs`,
      );
    }
    assert.equal(
      runPath.lines.some(
        (l) => argvOf(l)[1] === 'functions' && argvOf(l)[2] !== 'describe',
      ),
      false,
      'no gcloud functions command but the check for a function of the other path',
    );
    assert.equal(
      functionsPath.lines.some((l) => l.startsWith('gcloud run deploy')),
      false,
      'the default path stays gcloud functions deploy',
    );
    const enable = command(runPath.lines, 'gcloud', 'services', 'enable');
    assert.equal(enable.includes('cloudfunctions.googleapis.com'), false);
    assert.ok(enable.includes('run.googleapis.com'));
  });

  it('reads the URL and binds the invokers through gcloud run services, as the default path does through gcloud functions', () => {
    const runPath = deploy(EVERYTHING, [...EVERYTHING_ARGS, '--run-deploy']);
    const functionsPath = deploy(EVERYTHING, EVERYTHING_ARGS);

    assert.equal(runPath.status, 0, runPath.stderr);
    const url = command(runPath.lines, 'gcloud', 'run', 'services', 'describe');
    assert.equal(flag(url, '--format'), 'value(status.url)');
    const bindings = runPath.lines
      .map(argvOf)
      .filter(
        (a) =>
          a.slice(1, 4).join(' ') === 'run services add-iam-policy-binding',
      );
    const functionsBindings = functionsPath.lines
      .map(argvOf)
      .filter(
        (a) =>
          a.slice(1, 3).join(' ') === 'functions add-invoker-policy-binding',
      );
    assert.deepEqual(
      bindings.map((a) => [
        a[4],
        flag(a, '--member'),
        flag(a, '--role'),
        ...where(a),
      ]),
      functionsBindings.map((a) => [
        a[3],
        flag(a, '--member'),
        'roles/run.invoker',
        ...where(a),
      ]),
      'the invoker, then the runtime account for catch-up',
    );
    assert.equal(bindings.length, 2);
    const runDeploy = command(runPath.lines, 'gcloud', 'run', 'deploy');
    assert.ok(
      runDeploy.includes('--no-invoker-iam-check'),
      'verify-oidc turns the check off in the deploy itself',
    );
    assert.equal(
      runPath.lines.some((l) => l.startsWith('gcloud run services update')),
      false,
    );
    assert.equal(
      flag(runDeploy, '--set-env-vars'),
      flag(
        command(functionsPath.lines, 'gcloud', 'functions', 'deploy'),
        '--set-env-vars',
      ),
      'OIDC_AUDIENCE, OIDC_INVOKERS and the rest, as on the default path',
    );
    assert.match(
      runPath.stderr,
      /gcloud run services logs read scheduler-run-once --region=us-central1/,
    );
  });

  it('sets up everything else exactly as the default path does: accounts, Firestore, Scheduler jobs, metrics, alerts, dashboard', () => {
    const pairs: [DeployResult, DeployResult][] = [
      [deploy(REQUIRED, DRY_RUN_PATH), deploy(REQUIRED)],
      [
        deploy(EVERYTHING, [...EVERYTHING_ARGS, '--run-deploy']),
        deploy(EVERYTHING, EVERYTHING_ARGS),
      ],
    ];

    for (const [runPath, functionsPath] of pairs) {
      const shared = sharedCommands(runPath);
      assert.deepEqual(shared, sharedCommands(functionsPath));
      for (const step of [
        'iam service-accounts',
        'projects add-iam-policy-binding',
        'firestore fields ttls',
        'firestore indexes composite',
        'scheduler jobs',
        'logging metrics',
        'monitoring dashboards',
      ]) {
        assert.ok(
          shared.some((l) => l.startsWith(`gcloud ${step}`)),
          `no ${step} in:\n${shared.join('\n')}`,
        );
      }
    }
    const [, everything] = pairs;
    assert.ok(
      everything?.[0].lines.some((l) =>
        l.startsWith('gcloud alpha monitoring policies'),
      ),
      'the alert policies',
    );
  });

  it('shows both paths in --help', () => {
    const help = spawnSync(DEPLOY, ['--help'], {
      encoding: 'utf8',
      stdio: NO_STDIN,
      timeout: CHILD_TIMEOUT_MS,
    });

    assert.equal(help.status, 0, help.stderr);
    assert.match(help.stdout, /\[--run-deploy\]/);
    assert.match(
      help.stdout,
      /--run-deploy {7}Deploy with `gcloud run deploy --function` \(Cloud Run Admin API/,
    );
    assert.match(
      help.stdout,
      /`gcloud functions deploy --gen2`\n\s+\(Cloud Functions v2 API, the default\)/,
    );
    assert.match(help.stdout, /gcloud functions detach/);
  });
});

/** The two refusals, each run once: the parser test also reads the commands they print. */
const refusals = {
  runPath: undefined as DeployResult | undefined,
  defaultPath: undefined as DeployResult | undefined,
  deployed: undefined as DeployResult | undefined,
};

/** `--run-deploy` on a function of the Cloud Functions API (cloudGcloud's `functions describe` finds one). */
function refusedRunPath(): DeployResult {
  refusals.runPath ??= deploy(REQUIRED, ['--run-deploy'], cloudGcloud());
  return refusals.runPath;
}

/** `--run-deploy` on a project without a function, then the default path on the service it made. */
function refusedDefaultPath(): {
  deployed: DeployResult;
  refused: DeployResult;
} {
  if (refusals.deployed === undefined || refusals.defaultPath === undefined) {
    const cloud = runAdminCloud();
    refusals.deployed = deploy(REQUIRED, ['--run-deploy'], cloud);
    refusals.defaultPath = deploy(REQUIRED, [], cloud);
  }
  return { deployed: refusals.deployed, refused: refusals.defaultPath };
}

describe('deploy.sh on a project of the other path (gcloud faked)', () => {
  it('--run-deploy stops at a function of the Cloud Functions API, creating nothing, and prints gcloud functions detach', () => {
    const run = refusedRunPath();

    assert.equal(run.status, 1, run.stderr);
    assert.match(
      run.stderr,
      /is a function of the Cloud Functions v2 API[\s\S]*\n {4}\.\/deploy\.sh\n[\s\S]*\n {4}gcloud functions detach scheduler-run-once --region=us-central1 --project=my-project\n {4}\.\/deploy\.sh --run-deploy\n/,
    );
    assert.deepEqual(
      run.gcloudCalls.map((argv) => argv.slice(1, 3).join(' ')),
      ['services enable', 'firestore databases', 'functions describe'],
    );
  });

  it('deploys a project with no function through the Cloud Run Admin API, then the default path stops at it and prints how to move it', () => {
    const { deployed: run, refused: again } = refusedDefaultPath();

    assert.equal(run.status, 0, run.stderr);
    assert.equal(callsOf(run.gcloudCalls, 'gcloud', 'run', 'deploy').length, 1);
    assert.equal(
      callsOf(
        run.gcloudCalls,
        'gcloud',
        'run',
        'services',
        'add-iam-policy-binding',
      ).length,
      1,
    );
    assert.deepEqual(
      callsOf(run.gcloudCalls, 'gcloud', 'functions').map((a) => a[2]),
      ['describe'],
      'only the check for a function of the other path',
    );
    const [job] = callsOf(
      run.gcloudCalls,
      'gcloud',
      'scheduler',
      'jobs',
      'create',
      'http',
    );
    assert.equal(flag(job ?? [], '--uri'), FUNCTION_URL);
    assert.equal(flag(job ?? [], '--oidc-token-audience'), FUNCTION_URL);

    assert.equal(again.status, 1, again.stderr);
    assert.match(
      again.stderr,
      /is a Cloud Run service that is not a function[\s\S]*\n {4}\.\/deploy\.sh --run-deploy\n[\s\S]*\n {4}gcloud run services delete scheduler-run-once --region=us-central1 --project=my-project\n {4}\.\/deploy\.sh\n/,
    );
    assert.deepEqual(
      again.gcloudCalls.map((argv) => argv.slice(1, 4).join(' ')),
      [
        'services enable cloudfunctions.googleapis.com',
        'firestore databases describe',
        'run services describe',
        'functions describe scheduler-run-once',
      ],
      'nothing created or deployed',
    );
  });
});

describe('deploy.sh --run-deploy and the real gcloud parser', () => {
  it('accepts every command of the run path, and those its refusals and summary print', {
    skip: !HAS_GCLOUD && NO_GCLOUD,
  }, async (t) => {
    const dryRuns = [
      deploy(REQUIRED, DRY_RUN_PATH),
      deploy(EVERYTHING, [...EVERYTHING_ARGS, '--run-deploy']),
    ];
    const printed = [refusedRunPath(), refusedDefaultPath().refused].map(
      (run) => printedCommands(run.stderr),
    );
    const runDeploy =
      dryRuns[0]?.lines.find((l) => l.startsWith('gcloud run deploy')) ?? '';
    const lines = [
      ...distinctShapes([...new Set(dryRuns.flatMap((run) => run.lines))]),
      ...printed.flat(),
      ...printedCommands(dryRuns[0]?.stderr ?? ''),
    ];

    // Last: a flag gcloud refuses beside --function (they are one group), so the check has teeth.
    const results = await parseAll([...lines, `${runDeploy} --command=node`]);

    const teeth = results.pop();
    assert.equal(teeth?.code, 2, teeth?.stderr);
    const refused = results.filter(
      (r) => r.code !== 1 || !NO_ACCOUNT.test(r.stderr),
    );
    assert.deepEqual(
      refused.map((r) => `exit ${r.code}: ${r.line}\n${r.stderr.trim()}`),
      [],
    );
    assert.deepEqual(
      printed.map((commands) => commands.length),
      [1, 2],
      'detach; delete and the describe that says why a check failed',
    );
    for (const expected of [
      'gcloud run deploy ',
      'gcloud run services describe ',
      'gcloud run services add-iam-policy-binding ',
      'gcloud functions describe ',
      'gcloud functions detach ',
      'gcloud run services delete ',
      'gcloud run services logs read ',
    ]) {
      assert.ok(
        results.some((r) => r.line.startsWith(expected)),
        `${expected.trim()} was not parsed`,
      );
    }
    t.diagnostic(`${results.length} commands parsed`);
  });
});
