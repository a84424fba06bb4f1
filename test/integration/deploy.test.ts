/**
 * deploy.sh: its dry run prints commands that the real gcloud parser accepts, it refuses bad inputs
 * before running anything, and it is shellcheck clean. Needs no account and no network: gcloud runs
 * under a throwaway configuration, where every command that parses stops at "no active account".
 */

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';

const ROOT = path.resolve(import.meta.dirname, '../..');
const DEPLOY = path.join(ROOT, 'deploy.sh');
const REQUIRED = {
  GOOGLE_CLOUD_PROJECT: 'my-project',
  REGION: 'us-central1',
  SCHEDULE: '*/5 * * * *',
};
/** What gcloud says once a command has parsed and needs credentials. */
const NO_ACCOUNT = /You do not currently have an active account selected/;
/** gcloud starts slowly (~1-2 s): this many at once keeps the parser checks short. */
const PARALLEL = 4;

const scratch = mkdtempSync(path.join(tmpdir(), 'deploy-test-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** A stand-in for gcloud, first on PATH: it logs each call and answers with a bash `body`. */
interface FakeGcloud {
  bin: string;
  calls: string;
}

/** A fake gcloud that fails every call: shows whether deploy.sh ran gcloud at all. */
function fakeGcloud(body = 'exit 99'): FakeGcloud {
  const bin = mkdtempSync(path.join(scratch, 'bin-'));
  const calls = path.join(bin, 'calls');
  writeFileSync(
    path.join(bin, 'gcloud'),
    `#!/usr/bin/env bash\nprintf '%q ' gcloud "$@" >> ${JSON.stringify(calls)}\necho >> ${JSON.stringify(calls)}\n${body}\n`,
  );
  chmodSync(path.join(bin, 'gcloud'), 0o755);
  return { bin, calls };
}

/**
 * A fake gcloud that keeps the resources deploy.sh checks for in its directory: created by the
 * first run, found by the next. `database` is what `firestore databases describe` answers.
 */
const FUNCTION_URL = 'https://scheduled-job-abc123-uc.a.run.app';

function cloudGcloud(database = 'echo FIRESTORE_NATIVE'): FakeGcloud {
  return fakeGcloud(`state="$(dirname "$0")"
case "$1 $2 $3" in
  "iam service-accounts describe") [[ -e "$state/sa-\${4%%@*}" ]] ;;
  "iam service-accounts create") touch "$state/sa-$4" ;;
  "firestore databases describe") ${database} ;;
  "firestore fields ttls")
    if [[ "$4" == list ]]; then [[ ! -e "$state/ttl" ]] || printf 'expire_at\\tACTIVE\\n'; else touch "$state/ttl"; fi ;;
  "functions describe "*) echo ${FUNCTION_URL} ;;
  "scheduler jobs describe") [[ -e "$state/job" ]] ;;
  "scheduler jobs create") touch "$state/job" ;;
esac`);
}

interface DeployResult {
  status: number | null;
  stdout: string;
  stderr: string;
  /** The non-empty lines of stdout: in a dry run, one command each. */
  lines: string[];
  /** The words of each call that reached the fake gcloud during this run. */
  gcloudCalls: string[][];
}

/** Runs deploy.sh with only `inputs` (and PATH, HOME) in its environment, gcloud faked. */
function deploy(
  inputs: Record<string, string>,
  args: string[] = ['--dry-run'],
  fake: FakeGcloud = fakeGcloud(),
): DeployResult {
  rmSync(fake.calls, { force: true });
  const result = spawnSync(DEPLOY, args, {
    cwd: scratch,
    encoding: 'utf8',
    env: {
      PATH: `${fake.bin}${path.delimiter}${process.env.PATH ?? ''}`,
      HOME: process.env.HOME ?? scratch,
      ...inputs,
    },
  });
  const calls = existsSync(fake.calls) ? readFileSync(fake.calls, 'utf8').split('\n') : [];
  return {
    status: result.status,
    stdout: result.stdout,
    stderr: result.stderr,
    lines: result.stdout.split('\n').filter((l) => l !== ''),
    gcloudCalls: calls.filter((l) => l !== '').map((l) => argvOf(l)),
  };
}

/** The words bash reads from a printed line, as the command would receive them. */
function argvOf(line: string): string[] {
  const result = spawnSync('bash', ['-c', `printf '%s\\0' ${line}`], { encoding: 'utf8' });
  assert.equal(result.status, 0, `bash could not read back: ${line}\n${result.stderr}`);
  const argv = result.stdout.split('\0');
  argv.pop();
  return argv;
}

/** The command whose words start with `prefix`, from a dry run's lines. */
function command(lines: string[], ...prefix: string[]): string[] {
  const found = lines.map(argvOf).find((argv) => prefix.every((word, i) => argv[i] === word));
  assert.ok(found, `no "${prefix.join(' ')}" in:\n${lines.join('\n')}`);
  return found;
}

/** The value of `--flag=value` in argv. */
function flag(argv: string[], name: string): string | undefined {
  return argv.find((a) => a.startsWith(`${name}=`))?.slice(name.length + 1);
}

/** Splits a gcloud dict flag value as `gcloud topic escaping` describes, `^D^` delimiter included. */
function gcloudDict(value: string): Map<string, string> {
  const custom = /^\^([^^]+)\^/.exec(value);
  const delimiter = custom?.[1] ?? ',';
  const items = (custom ? value.slice(custom[0].length) : value).split(delimiter);
  return new Map(
    items.map((item) => [item.slice(0, item.indexOf('=')), item.slice(item.indexOf('=') + 1)]),
  );
}

function installed(tool: string, versionArg: string): boolean {
  return spawnSync(tool, [versionArg], { stdio: 'ignore' }).error === undefined;
}
const HAS_GCLOUD = installed('gcloud', '--version');
const HAS_SHELLCHECK = installed('shellcheck', '--version');
const NO_GCLOUD = 'gcloud is not installed: the real parser cannot be checked';

/** An environment for gcloud with no account, no project and nothing that reaches the network. */
function gcloudEnv(config: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    const keep = !/^(CLOUDSDK_|GOOGLE_|GCLOUD_)/.test(key) || key.startsWith('CLOUDSDK_PYTHON');
    if (keep) env[key] = value;
  }
  return {
    ...env,
    CLOUDSDK_CONFIG: config,
    CLOUDSDK_CORE_DISABLE_PROMPTS: '1',
    // Without these two, gcloud looks up metadata.google.internal to learn whether it runs on GCE.
    CLOUDSDK_CORE_CHECK_GCE_METADATA: 'false',
    CLOUDSDK_METRICS_ENVIRONMENT: 'deploy-test',
    CLOUDSDK_CORE_DISABLE_USAGE_REPORTING: 'true',
    CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK: 'true',
  };
}

interface GcloudRun {
  line: string;
  code: number | null;
  stderr: string;
}

/** Runs gcloud with `argv` under its own throwaway configuration. */
function runGcloud(line: string, argv: string[]): Promise<GcloudRun> {
  const config = mkdtempSync(path.join(scratch, 'gcloud-'));
  return new Promise((resolve, reject) => {
    const child = spawn('gcloud', argv, {
      cwd: ROOT,
      env: gcloudEnv(config),
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: 60_000,
    });
    let stderr = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ line, code, stderr }));
  });
}

/** Runs every printed line through the real gcloud, `PARALLEL` at a time. */
async function parseAll(lines: string[]): Promise<GcloudRun[]> {
  const results: GcloudRun[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < lines.length) {
      const index = next++;
      const line = lines[index] as string;
      const [program, ...argv] = argvOf(line);
      assert.equal(program, 'gcloud', `not a gcloud command: ${line}`);
      results[index] = await runGcloud(line, argv);
    }
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
  return results;
}

/** Inputs that exercise quoting and every optional path. */
const AWKWARD = {
  ...REQUIRED,
  SCHEDULE: '0 9 * JAN-MAR MON-FRI',
  TIME_ZONE: 'America/New_York',
  JOB_ID: 'nightly_report-1',
  RUN_KEY_SCOPE: `it's,"$HOME"*|@;\`x\`/prod`,
  RUN_KEY_SCOPE_HEADERS: 'X-Tenant',
  JOB_HEADERS: 'X-Tenant=acme corp',
  RUN_KEY_SCOPE_PARAMS: 'env',
  JOB_QUERY: 'env=prod&x=1',
  FIRESTORE_TIMEOUT_SECONDS: '20',
};

describe('deploy.sh --dry-run', () => {
  it('prints one gcloud command per step, in order, and runs no gcloud', () => {
    const run = deploy(REQUIRED);

    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(run.gcloudCalls, []);
    const steps = [
      ['services', 'enable'],
      ['firestore', 'databases', 'describe'],
      ['iam', 'service-accounts', 'create', 'scheduled-job-run'],
      ['projects', 'add-iam-policy-binding', 'my-project'],
      ['iam', 'service-accounts', 'create', 'scheduled-job-invoker'],
      ['firestore', 'fields', 'ttls', 'update', 'expire_at'],
      ['functions', 'deploy', 'scheduled-job'],
      ['functions', 'describe', 'scheduled-job'],
      ['functions', 'add-invoker-policy-binding', 'scheduled-job'],
      ['scheduler', 'jobs', 'create', 'http', 'scheduled-job'],
    ];
    const argvs = run.lines.map(argvOf);
    for (const argv of argvs) assert.equal(argv[0], 'gcloud', argv.join(' '));
    const positions = steps.map((step) =>
      argvs.findIndex((argv) => step.every((word, i) => argv[i + 1] === word)),
    );
    assert.ok(!positions.includes(-1), `missing a step: ${JSON.stringify(positions)}`);
    assert.deepEqual(
      positions,
      [...positions].sort((a, b) => a - b),
    );
  });

  it('grants the runtime account roles/datastore.user only, unconditionally', () => {
    const run = deploy(REQUIRED);

    const bindings = run.lines.map(argvOf).filter((argv) => argv[2] === 'add-iam-policy-binding');
    assert.equal(bindings.length, 1);
    const binding = bindings[0] as string[];
    assert.equal(
      flag(binding, '--member'),
      'serviceAccount:scheduled-job-run@my-project.iam.gserviceaccount.com',
    );
    assert.equal(flag(binding, '--role'), 'roles/datastore.user');
    assert.equal(flag(binding, '--condition'), 'None');
  });

  it('deploys a private 2nd gen HTTP function from the repository root', () => {
    const run = deploy(REQUIRED);

    const argv = command(run.lines, 'gcloud', 'functions', 'deploy');
    for (const word of ['--gen2', '--trigger-http', '--no-allow-unauthenticated', '--source=.']) {
      assert.ok(argv.includes(word), `${word} missing`);
    }
    assert.equal(flag(argv, '--entry-point'), 'handleScheduledJob');
    assert.equal(flag(argv, '--runtime'), 'nodejs24');
    assert.equal(flag(argv, '--region'), 'us-central1');
    assert.equal(flag(argv, '--timeout'), '180s');
    assert.equal(
      flag(argv, '--service-account'),
      'scheduled-job-run@my-project.iam.gserviceaccount.com',
    );
  });

  it('passes the runtime configuration as env vars, commas and quotes included', () => {
    const run = deploy(AWKWARD);

    const env = gcloudDict(
      flag(command(run.lines, 'gcloud', 'functions', 'deploy'), '--set-env-vars') ?? '',
    );
    assert.deepEqual(Object.fromEntries(env), {
      NODE_ENV: 'production',
      GOOGLE_CLOUD_PROJECT: 'my-project',
      LEASE_SECONDS: '300',
      RETENTION_SECONDS: '86400',
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

  it('with AUTH_MODE=verify-oidc turns the invoker IAM check off and gives the function its audience', () => {
    const run = deploy({ ...REQUIRED, AUTH_MODE: 'verify-oidc' });

    const env = gcloudDict(
      flag(command(run.lines, 'gcloud', 'functions', 'deploy'), '--set-env-vars') ?? '',
    );
    const audience = 'https://us-central1-my-project.cloudfunctions.net/scheduled-job';
    assert.equal(env.get('AUTH_MODE'), 'verify-oidc');
    assert.equal(env.get('OIDC_AUDIENCE'), audience);
    assert.equal(
      env.get('OIDC_INVOKERS'),
      'scheduled-job-invoker@my-project.iam.gserviceaccount.com',
    );
    const update = command(run.lines, 'gcloud', 'run', 'services', 'update');
    assert.ok(update.includes('--no-invoker-iam-check'), update.join(' '));
    const job = command(run.lines, 'gcloud', 'scheduler', 'jobs', 'create');
    assert.equal(flag(job, '--oidc-token-audience'), audience);
  });

  it('by default keeps the invoker IAM check and uses the function URL as the audience', () => {
    const run = deploy(REQUIRED);

    assert.ok(!run.lines.some((l) => l.startsWith('gcloud run services update')));
    const job = command(run.lines, 'gcloud', 'scheduler', 'jobs', 'create');
    assert.equal(flag(job, '--oidc-token-audience'), 'https://FUNCTION_URL.invalid');
  });

  it('scopes run ids to project and region unless RUN_KEY_SCOPE says otherwise', () => {
    const run = deploy(REQUIRED);

    const env = gcloudDict(
      flag(command(run.lines, 'gcloud', 'functions', 'deploy'), '--set-env-vars') ?? '',
    );
    assert.equal(env.get('RUN_KEY_SCOPE'), 'my-project/us-central1');
  });

  it('creates the Scheduler job with an OIDC token for the invoker and the retry settings', () => {
    const run = deploy(AWKWARD);

    const argv = command(
      run.lines,
      'gcloud',
      'scheduler',
      'jobs',
      'create',
      'http',
      'nightly_report-1',
    );
    assert.equal(flag(argv, '--location'), 'us-central1');
    assert.equal(flag(argv, '--schedule'), '0 9 * JAN-MAR MON-FRI');
    assert.equal(flag(argv, '--time-zone'), 'America/New_York');
    assert.equal(flag(argv, '--uri'), 'https://FUNCTION_URL.invalid?env=prod&x=1');
    assert.equal(flag(argv, '--oidc-token-audience'), 'https://FUNCTION_URL.invalid');
    assert.equal(
      flag(argv, '--oidc-service-account-email'),
      'scheduled-job-invoker@my-project.iam.gserviceaccount.com',
    );
    assert.equal(flag(argv, '--http-method'), 'POST');
    assert.equal(flag(argv, '--attempt-deadline'), '180s');
    assert.equal(flag(argv, '--max-retry-attempts'), '3');
    assert.equal(flag(argv, '--max-retry-duration'), '3600s');
    assert.equal(flag(argv, '--min-backoff'), '30s');
    assert.equal(flag(argv, '--max-backoff'), '600s');
    assert.equal(flag(argv, '--max-doublings'), '5');
    assert.equal(flag(argv, '--headers'), 'X-Tenant=acme corp');
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
  });

  it('ends with how to trigger a run and the forced-run caveat', () => {
    const run = deploy(REQUIRED);

    assert.match(run.stderr, /gcloud scheduler jobs run scheduled-job --location=us-central1/);
    assert.match(run.stderr, /forced run carries the \*next\* schedule time/);
    assert.match(run.stderr, /duplicate/);
  });
});

/** The calls whose words start with `prefix`. */
function callsOf(calls: string[][], ...prefix: string[]): string[][] {
  return calls.filter((argv) => prefix.every((word, i) => argv[i] === word));
}

describe('deploy.sh on a project (gcloud faked)', () => {
  it('creates what is missing and points the job at the function URL', () => {
    const cloud = cloudGcloud();

    const run = deploy(REQUIRED, [], cloud);

    assert.equal(run.status, 0, run.stderr);
    assert.equal(callsOf(run.gcloudCalls, 'gcloud', 'iam', 'service-accounts', 'create').length, 2);
    assert.equal(
      callsOf(run.gcloudCalls, 'gcloud', 'firestore', 'fields', 'ttls', 'update').length,
      1,
    );
    const [job] = callsOf(run.gcloudCalls, 'gcloud', 'scheduler', 'jobs', 'create', 'http');
    assert.ok(job, 'no job created');
    assert.equal(flag(job, '--uri'), FUNCTION_URL);
    assert.equal(flag(job, '--oidc-token-audience'), FUNCTION_URL);
    assert.match(run.stdout, /gcloud scheduler jobs run scheduled-job/);
  });

  it('updates in place when run again, creating nothing', () => {
    const cloud = cloudGcloud();
    assert.equal(deploy(REQUIRED, [], cloud).status, 0);

    const again = deploy({ ...REQUIRED, SCHEDULE: '0 * * * *' }, [], cloud);

    assert.equal(again.status, 0, again.stderr);
    assert.deepEqual(
      again.gcloudCalls.filter((argv) => argv.includes('create')).map((argv) => argv.join(' ')),
      [],
    );
    assert.equal(
      callsOf(again.gcloudCalls, 'gcloud', 'firestore', 'fields', 'ttls', 'update').length,
      0,
    );
    assert.equal(callsOf(again.gcloudCalls, 'gcloud', 'functions', 'deploy').length, 1);
    const [job] = callsOf(again.gcloudCalls, 'gcloud', 'scheduler', 'jobs', 'update', 'http');
    assert.ok(job, 'job not updated');
    assert.equal(flag(job, '--schedule'), '0 * * * *');
    assert.equal(flag(job, '--uri'), FUNCTION_URL);
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

describe('the real gcloud parser', () => {
  it('refuses a wrong flag with a usage error, not the account error', {
    skip: !HAS_GCLOUD && NO_GCLOUD,
  }, async () => {
    const line = deploy(REQUIRED).lines.find((l) =>
      l.includes(' scheduler jobs create http '),
    ) as string;

    const [good, wrong] = await parseAll([line, `${line} --update-headers=X-Tenant=acme`]);

    assert.equal(good?.code, 1, good?.stderr);
    assert.match(good?.stderr ?? '', NO_ACCOUNT);
    assert.equal(wrong?.code, 2, wrong?.stderr);
    assert.match(wrong?.stderr ?? '', /unrecognized arguments: --update-headers/);
    assert.doesNotMatch(wrong?.stderr ?? '', NO_ACCOUNT);
  });

  it('accepts every command of the dry run, create and update paths', {
    skip: !HAS_GCLOUD && NO_GCLOUD,
  }, async (t) => {
    const lines = new Set([
      ...deploy(REQUIRED).lines,
      ...deploy(AWKWARD).lines,
      ...deploy(AWKWARD, ['--dry-run', '--assume-existing']).lines,
      ...deploy({ ...REQUIRED, AUTH_MODE: 'verify-oidc' }).lines,
    ]);

    const results = await parseAll([...lines]);

    const refused = results.filter((r) => r.code !== 1 || !NO_ACCOUNT.test(r.stderr));
    assert.deepEqual(
      refused.map((r) => `exit ${r.code}: ${r.line}\n${r.stderr.trim()}`),
      [],
    );
    assert.ok(results.length >= 15, `only ${results.length} commands`);
    t.diagnostic(`${results.length} commands parsed`);
  });

  it("reads --set-env-vars into exactly the function's variables", {
    skip: !HAS_GCLOUD && NO_GCLOUD,
  }, (t) => {
    // gcloud's own ArgDict, from the SDK that the `gcloud` on PATH belongs to.
    const which = spawnSync('bash', ['-c', 'command -v gcloud'], {
      encoding: 'utf8',
    }).stdout.trim();
    const sdk = path.resolve(path.dirname(realpathSync(which)), '..');
    const bundled = path.join(sdk, 'platform/bundledpythonunix/bin/python3');
    const python = process.env.CLOUDSDK_PYTHON ?? (existsSync(bundled) ? bundled : 'python3');
    if (!existsSync(path.join(sdk, 'lib/googlecloudsdk/calliope/arg_parsers.py'))) {
      t.skip(`gcloud's Python library is not under ${sdk}`);
      return;
    }
    const value = flag(
      command(deploy(AWKWARD).lines, 'gcloud', 'functions', 'deploy'),
      '--set-env-vars',
    );

    const parsed = spawnSync(
      python,
      [
        '-c',
        [
          'import json, sys',
          `sys.path[:0] = [${JSON.stringify(path.join(sdk, 'lib'))}, ${JSON.stringify(path.join(sdk, 'lib/third_party'))}]`,
          'from googlecloudsdk.calliope import arg_parsers',
          'print(json.dumps(arg_parsers.ArgDict()(sys.argv[1])))',
        ].join('\n'),
        value ?? '',
      ],
      { encoding: 'utf8' },
    );

    assert.equal(parsed.status, 0, parsed.stderr);
    const env = JSON.parse(parsed.stdout) as Record<string, string>;
    assert.equal(env.RUN_KEY_SCOPE, AWKWARD.RUN_KEY_SCOPE);
    assert.deepEqual(env, Object.fromEntries(gcloudDict(value ?? '')));
  });

  it('uploads the sources and lockfile, and leaves tests and local state out', {
    skip: !HAS_GCLOUD && NO_GCLOUD,
  }, () => {
    const config = mkdtempSync(path.join(scratch, 'gcloud-'));

    const result = spawnSync('gcloud', ['meta', 'list-files-for-upload', '.'], {
      cwd: ROOT,
      encoding: 'utf8',
      env: gcloudEnv(config),
    });

    assert.equal(result.status, 0, result.stderr);
    const files = result.stdout.split('\n').filter((f) => f !== '');
    for (const kept of [
      'package.json',
      'package-lock.json',
      'tsconfig.json',
      'tsconfig.build.json',
      'src/index.ts',
    ]) {
      assert.ok(files.includes(kept), `${kept} is not uploaded`);
    }
    const leaked = files.filter((f) =>
      /^(test|node_modules|build|bench|scripts|\.ci|\.git|\.emulator)\//.test(f),
    );
    assert.deepEqual(leaked, []);
  });
});

describe('deploy.sh refuses bad inputs before any command', () => {
  const cases: { name: string; inputs: Record<string, string>; says: RegExp[] }[] = [
    {
      name: 'an App Engine (groc) schedule',
      inputs: { ...REQUIRED, SCHEDULE: 'every 5 minutes' },
      says: [/SCHEDULE='every 5 minutes'.*unix-cron/, /X-CloudScheduler-ScheduleTime/],
    },
    {
      name: 'a lease shorter than the function timeout',
      inputs: { ...REQUIRED, LEASE_SECONDS: '120' },
      says: [/LEASE_SECONDS \(120\) must be at least FUNCTION_TIMEOUT_SECONDS \(180\)/],
    },
    {
      name: 'an attempt deadline above the function timeout',
      inputs: { ...REQUIRED, FUNCTION_TIMEOUT_SECONDS: '240', ATTEMPT_DEADLINE_SECONDS: '300' },
      says: [/FUNCTION_TIMEOUT_SECONDS \(240\) must be at least ATTEMPT_DEADLINE_SECONDS \(300\)/],
    },
    {
      name: 'an attempt deadline under 15 s',
      inputs: { ...REQUIRED, ATTEMPT_DEADLINE_SECONDS: '14' },
      says: [/ATTEMPT_DEADLINE_SECONDS='14'.* from 15 to 1800/],
    },
    {
      name: 'an attempt deadline over 1800 s',
      inputs: {
        ...REQUIRED,
        ATTEMPT_DEADLINE_SECONDS: '1801',
        FUNCTION_TIMEOUT_SECONDS: '3600',
        LEASE_SECONDS: '3600',
      },
      says: [/ATTEMPT_DEADLINE_SECONDS='1801'.* from 15 to 1800/],
    },
    {
      name: 'a function timeout over 3600 s',
      inputs: { ...REQUIRED, FUNCTION_TIMEOUT_SECONDS: '3601', LEASE_SECONDS: '4000' },
      says: [/FUNCTION_TIMEOUT_SECONDS='3601'.* from 1 to 3600/],
    },
    {
      name: 'a retention that a late retry could outlive',
      inputs: { ...REQUIRED, RETENTION_SECONDS: '3600' },
      says: [/RETENTION_SECONDS \(3600\) must exceed the retry window \(3600 s/],
    },
    {
      name: 'a time zone that is not in the tz database',
      inputs: { ...REQUIRED, TIME_ZONE: 'Mars/Base' },
      says: [/TIME_ZONE='Mars\/Base': not in the tz database/],
    },
    {
      name: 'an unknown AUTH_MODE',
      inputs: { ...REQUIRED, AUTH_MODE: 'none' },
      says: [/AUTH_MODE='none': must be platform .* or verify-oidc/],
    },
    {
      name: 'a missing GOOGLE_CLOUD_PROJECT',
      inputs: { REGION: 'us-central1', SCHEDULE: '*/5 * * * *' },
      says: [/GOOGLE_CLOUD_PROJECT is required/],
    },
    {
      name: 'several missing and invalid inputs, listed at once',
      inputs: { LEASE_SECONDS: 'soon', RUNTIME_SA_NAME: 'x' },
      says: [
        /GOOGLE_CLOUD_PROJECT is required/,
        /REGION is required/,
        /SCHEDULE is required/,
        /LEASE_SECONDS='soon'/,
        /RUNTIME_SA_NAME='x'/,
      ],
    },
    {
      name: 'a scope header that the job would not send',
      inputs: { ...REQUIRED, RUN_KEY_SCOPE_HEADERS: 'x-tenant' },
      says: [/JOB_HEADERS must include 'x-tenant'/],
    },
  ];

  for (const { name, inputs, says } of cases) {
    for (const args of [['--dry-run'], []]) {
      it(`refuses ${name}${args.length > 0 ? ' (dry run)' : ''}`, () => {
        const run = deploy(inputs, args);

        assert.equal(run.status, 2, run.stderr);
        for (const message of says) assert.match(run.stderr, message);
        assert.doesNotMatch(run.stdout, /gcloud/);
        assert.deepEqual(run.gcloudCalls, []);
      });
    }
  }

  it('refuses an unknown argument', () => {
    const run = deploy(REQUIRED, ['--dry-rum']);

    assert.equal(run.status, 2);
    assert.match(run.stderr, /unknown argument '--dry-rum'/);
    assert.deepEqual(run.gcloudCalls, []);
  });
});

describe('deploy.sh source', () => {
  it('is shellcheck clean', {
    skip: !HAS_SHELLCHECK && 'shellcheck is not installed (apt-get install shellcheck)',
  }, () => {
    const result = spawnSync('shellcheck', [DEPLOY], { encoding: 'utf8' });

    assert.equal(result.status, 0, result.stdout + result.stderr);
  });
});
