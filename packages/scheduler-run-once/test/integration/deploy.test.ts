/**
 * deploy.sh: its dry run prints commands that the real gcloud parser accepts, it refuses bad inputs
 * before running anything, and it is shellcheck clean. Needs no account and no network: gcloud runs
 * under a throwaway configuration, where every command that parses stops at "no active account".
 *
 * The jobs come from fixture declaration modules (`JOBS_MODULE`), so these tests do not depend on
 * what src/jobs.ts declares; deploy.sh reads them with the `node` on PATH (this test's Node).
 */

import assert from 'node:assert/strict';
import { type SpawnSyncReturns, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
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
import { fieldConfigs, INDEXES } from '../../src/ops/indexes.ts';
import {
  schedulerPauseArgs,
  shellLine,
} from '../../src/ops/scheduler-pause.ts';
import { validateJobs } from '../../src/policy/job-declaration.ts';
import { jobs as starterJobs } from '../fixtures/starter/src/jobs.ts';
import { writeStarterProject } from '../fixtures/starter-project.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const DEPLOY = path.join(ROOT, 'deploy.sh');
const FIXTURES = path.join(ROOT, 'test/fixtures');
/** The starter's `.gcloudignore`, at the root of the repository that holds this library. */
const STARTER_ROOT_GCLOUDIGNORE = path.resolve(ROOT, '../../.gcloudignore');
const NOT_IN_REPOSITORY = 'the library is not inside the starter repository';
/** One job, `scheduled-job` every 5 minutes in Etc/UTC, every setting at its default. */
const ONE_JOB = path.join(FIXTURES, 'jobs-one.ts');
/** `every-five` (defaults) and `nightly_report-1` (America/New_York, every setting given). */
const TWO_JOBS = path.join(FIXTURES, 'jobs-two.ts');
const REQUIRED = {
  GOOGLE_CLOUD_PROJECT: 'my-project',
  REGION: 'us-central1',
  JOBS_MODULE: ONE_JOB,
};
/** What gcloud says once a command has parsed and needs credentials. */
const NO_ACCOUNT = /You do not currently have an active account selected/;
/** gcloud starts slowly (~2 s of CPU): this many at once where each command is a process. */
const PARALLEL = 2;
/**
 * The stdio of every bash this file starts (deploy.sh, gcloud's wrapper, the read-backs): no stdin.
 * Node's stdin pipe is a socket, and bash whose stdin is a socket reads ~/.bashrc as if run by
 * sshd: on a machine whose ~/.bashrc runs `pyenv init`, that cost seconds per command.
 */
const NO_STDIN: ['ignore', 'pipe', 'pipe'] = ['ignore', 'pipe', 'pipe'];
/** The longest a child process of this file may take before the test fails saying what it waited for. */
const CHILD_TIMEOUT_MS = 90_000;

/** The project deployed (deploy.sh serves the directory it runs in) and the tests' other files. */
const scratch = writeStarterProject(
  mkdtempSync(path.join(tmpdir(), 'deploy-test-')),
);
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
    group="$(printf '%s\\n' "$@" | sed -n 's/^--collection-group=//p')"
    if [[ "$4" == list ]]; then [[ ! -e "$state/ttl-$group" ]] || printf 'expire_at\\tACTIVE\\n'; else touch "$state/ttl-$group"; fi ;;
  "functions describe "*) echo ${FUNCTION_URL} ;;
  "scheduler jobs describe") [[ -e "$state/job-$4" ]] ;;
  "scheduler jobs create") touch "$state/job-$5" ;;
  "scheduler jobs delete") rm "$state/job-$4" ;;
  "monitoring dashboards list") [[ ! -e "$state/dashboard" ]] || echo projects/my-project/dashboards/1 ;;
  "monitoring dashboards create") touch "$state/dashboard" ;;
  "scheduler jobs list") for job in "$state"/job-*; do [[ ! -e "$job" ]] || echo "\${job##*/job-}"; done ;;
  "firestore indexes composite")
    if [[ "$4" == list ]]; then
      if [[ -e "$state/indexes" ]]; then node ${JSON.stringify(path.join(ROOT, 'src/ops/indexes.ts'))} --as-listed; else echo '[]'; fi
    else touch "$state/indexes"; fi ;;
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

/** Runs deploy.sh with only `inputs` (and PATH, HOME, NODE_COMPILE_CACHE) in its environment, gcloud faked. */
function deploy(
  inputs: Record<string, string>,
  args: string[] = ['--dry-run'],
  fake?: FakeGcloud,
): DeployResult {
  if (fake !== undefined) {
    return runDeploy(inputs, args, fake);
  }
  // With the default fake (every call fails, nothing kept) a run is a function of its inputs and
  // arguments: reused while the files its commands name (.deploy/alerts) still hold what it wrote.
  const key = JSON.stringify([inputs, args]);
  const earlier = dryRuns.get(key);
  if (
    earlier !== undefined &&
    earlier.files === filesDigest(earlier.result.lines)
  ) {
    return earlier.result;
  }
  const result = runDeploy(inputs, args, fakeGcloud());
  dryRuns.set(key, { result, files: filesDigest(result.lines) });
  return result;
}

/** Runs of {@link deploy} with the default fake, by inputs and arguments. */
const dryRuns = new Map<string, { result: DeployResult; files: string }>();

/** A digest of the files that `lines` pass to gcloud (`--config-from-file=`, `--policy-from-file=`). */
function filesDigest(lines: string[]): string {
  const hash = createHash('sha256');
  for (const word of lines.flatMap(argvOf)) {
    const file = /^--(config|policy)-from-file=(.*)$/.exec(word)?.[2];
    if (file !== undefined) {
      hash.update(`${file}\0${existsSync(file) ? readFileSync(file) : ''}\0`);
    }
  }
  return hash.digest('hex');
}

function runDeploy(
  inputs: Record<string, string>,
  args: string[],
  fake: FakeGcloud,
): DeployResult {
  rmSync(fake.calls, { force: true });
  const result = spawnSync(DEPLOY, args, {
    cwd: scratch,
    encoding: 'utf8',
    stdio: NO_STDIN,
    env: {
      PATH: `${fake.bin}${path.delimiter}${process.env.PATH ?? ''}`,
      HOME: process.env.HOME ?? scratch,
      // Speed only: the Node compile cache npm test sets, for deploy.sh's node commands.
      ...(process.env.NODE_COMPILE_CACHE
        ? { NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE }
        : {}),
      ...inputs,
    },
    timeout: CHILD_TIMEOUT_MS,
  });
  assert.equal(
    result.error,
    undefined,
    `deploy.sh ${args.join(' ')} did not finish: ${result.error}`,
  );
  const calls = existsSync(fake.calls)
    ? readFileSync(fake.calls, 'utf8').split('\n')
    : [];
  const lines = result.stdout.split('\n').filter((l) => l !== '');
  const callLines = calls.filter((l) => l !== '');
  readBack([...lines, ...callLines]);
  return {
    status: result.status,
    stdout: result.stdout,
    stderr: result.stderr,
    lines,
    gcloudCalls: callLines.map((l) => argvOf(l)),
  };
}

/** The words bash read back from each printed line, by line. */
const readBackWords = new Map<string, string[]>();

/**
 * Has bash read back every line of `lines` in one process (a process per line costs more than
 * the rest of a dry run's checks): each line's words, counted, into {@link readBackWords}.
 */
function readBack(lines: string[]): void {
  const fresh = [...new Set(lines)].filter((line) => !readBackWords.has(line));
  if (fresh.length === 0) {
    return;
  }
  const script = fresh
    .map((line) => `set -- ${line}\nprintf '%s\\0' "$#" "$@"`)
    .join('\n');
  const result = spawnSync('bash', ['-c', script], {
    encoding: 'utf8',
    stdio: NO_STDIN,
    timeout: CHILD_TIMEOUT_MS,
  });
  if (result.status !== 0) {
    return; // argvOf reads each line alone and names the one that fails
  }
  const words = result.stdout.split('\0');
  let at = 0;
  for (const line of fresh) {
    const count = Number(words[at]);
    readBackWords.set(line, words.slice(at + 1, at + 1 + count));
    at += 1 + count;
  }
}

/** The words bash reads from a printed line, as the command would receive them. */
function argvOf(line: string): string[] {
  const known = readBackWords.get(line);
  if (known !== undefined) {
    return known;
  }
  const result = spawnSync('bash', ['-c', `printf '%s\\0' ${line}`], {
    encoding: 'utf8',
    stdio: NO_STDIN,
    timeout: CHILD_TIMEOUT_MS,
  });
  assert.equal(
    result.status,
    0,
    `bash could not read back: ${line}\n${result.stderr}`,
  );
  const argv = result.stdout.split('\0');
  argv.pop();
  readBackWords.set(line, argv);
  return argv;
}

/** The command whose words start with `prefix`, from a dry run's lines. */
function command(lines: string[], ...prefix: string[]): string[] {
  const found = lines
    .map(argvOf)
    .find((argv) => prefix.every((word, i) => argv[i] === word));
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
  const items = (custom ? value.slice(custom[0].length) : value).split(
    delimiter,
  );
  return new Map(
    items.map((item) => [
      item.slice(0, item.indexOf('=')),
      item.slice(item.indexOf('=') + 1),
    ]),
  );
}

/** Where `tool` is on PATH, found without running it (gcloud takes seconds to start). */
function onPath(tool: string): string | undefined {
  const found = spawnSync('bash', ['-c', `command -v ${tool}`], {
    encoding: 'utf8',
    stdio: NO_STDIN,
  });
  return found.status === 0 ? found.stdout.trim() : undefined;
}
const GCLOUD = onPath('gcloud');
const HAS_GCLOUD = GCLOUD !== undefined;
const HAS_SHELLCHECK = onPath('shellcheck') !== undefined;
const NO_GCLOUD = 'gcloud is not installed: the real parser cannot be checked';

/** An environment for gcloud with no account, no project and nothing that reaches the network. */
function gcloudEnv(config: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    const keep =
      !/^(CLOUDSDK_|GOOGLE_|GCLOUD_)/.test(key) ||
      key.startsWith('CLOUDSDK_PYTHON');
    if (keep) {
      env[key] = value;
    }
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

/** What a child process of {@link runChild} wrote and how it ended. */
interface ChildRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `command` with `input` on its stdin and resolves once it exited and its output was read.
 *
 * @throws after `CHILD_TIMEOUT_MS` (the child killed), naming `what` it waited for, or if it
 *   could not start.
 */
function runChild(
  what: string,
  command: string,
  args: string[],
  options: { env: NodeJS.ProcessEnv; input?: string },
): Promise<ChildRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: ROOT,
      env: options.env,
      stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(`timed out after ${CHILD_TIMEOUT_MS} ms: ${what}\n${stderr}`),
      );
    }, CHILD_TIMEOUT_MS);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`could not run ${command} (${what}): ${err.message}`));
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin?.end(options.input);
  });
}

/** Runs gcloud with `argv` under its own throwaway configuration, as a process of its own. */
async function runGcloud(line: string, argv: string[]): Promise<GcloudRun> {
  const config = mkdtempSync(path.join(scratch, 'gcloud-'));
  const run = await runChild(`gcloud to parse: ${line}`, 'gcloud', argv, {
    env: gcloudEnv(config),
  });
  return { line, code: run.code, stderr: run.stderr };
}

/**
 * One command per shape: commands that differ only in a resource name or in which generated file
 * they read (the five metrics, the policies) parse alike. Every flag value other than a file path
 * still counts, so quoting is still checked in every variant.
 */
function distinctShapes(lines: string[]): string[] {
  const seen = new Set<string>();
  return lines.filter((line) => {
    const shape = argvOf(line)
      .map((word) =>
        /^--(config|policy)-from-file=/.test(word)
          ? word.split('=')[0]
          : word.startsWith('-') || /^[a-z]+$/.test(word)
            ? word
            : '<name>',
      )
      .join(' ');
    if (seen.has(shape)) {
      return false;
    }
    seen.add(shape);
    return true;
  });
}

/** The words after `gcloud` of each line. */
function gcloudArgvs(lines: string[]): string[][] {
  return lines.map((line) => {
    const [program, ...argv] = argvOf(line);
    assert.equal(program, 'gcloud', `not a gcloud command: ${line}`);
    return argv;
  });
}

/** Runs every line through the gcloud binary, a process each, `PARALLEL` at a time. */
async function parseEach(lines: string[]): Promise<GcloudRun[]> {
  const argvs = gcloudArgvs(lines);
  const results: GcloudRun[] = [];
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < lines.length) {
      const index = next++;
      results[index] = await runGcloud(
        lines[index] as string,
        argvs[index] as string[],
      );
    }
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
  return results;
}

/**
 * gcloud's own entry point (`lib/gcloud.py` sets the path, `gcloud_main.CreateCLI` builds the CLI
 * the binary runs), loaded once and run on each command of a JSON list read from stdin in turn,
 * each with its stdout dropped and its stderr and exit status kept; prints them as one JSON list.
 */
const PARSE_EACH_COMMAND = [
  'import gcloud',
  'gcloud._fix_google_module()',
  'cli = gcloud._import_gcloud_main().CreateCLI([])',
  'import os, tempfile',
  'results = []',
  'saved_out, saved_err = os.dup(1), os.dup(2)',
  'for argv in json.load(sys.stdin):',
  '  with tempfile.TemporaryFile() as err:',
  '    sys.stdout.flush(); sys.stderr.flush()',
  '    os.dup2(os.open(os.devnull, os.O_WRONLY), 1); os.dup2(err.fileno(), 2)',
  '    try:',
  '      cli.Execute(argv)',
  '      code = 0',
  '    except SystemExit as exit:',
  '      code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)',
  '    finally:',
  '      sys.stdout.flush(); sys.stderr.flush()',
  '      os.dup2(saved_out, 1); os.dup2(saved_err, 2)',
  '    err.seek(0)',
  "    results.append({'code': code, 'stderr': err.read().decode('utf-8', 'replace')})",
  'print(json.dumps(results))',
];

/**
 * Runs every printed line through the real gcloud parser. Where gcloud's Python library is found,
 * one process loads gcloud's CLI once and runs each command in turn (a gcloud process costs ~2 s
 * of CPU to start, a command in the loaded CLI a few ms; the first test checks both answer alike);
 * else one gcloud process per command.
 */
async function parseAll(lines: string[]): Promise<GcloudRun[]> {
  const sdk = gcloudSdk();
  if (sdk === undefined) {
    return parseEach(lines);
  }
  const argvs = gcloudArgvs(lines);
  const run = await runChild(
    `gcloud's CLI to parse ${lines.length} commands`,
    sdk.python,
    ['-c', [...sdk.prelude, ...PARSE_EACH_COMMAND].join('\n')],
    {
      env: gcloudEnv(mkdtempSync(path.join(scratch, 'gcloud-'))),
      input: JSON.stringify(argvs),
    },
  );
  assert.equal(
    run.code,
    0,
    `gcloud's CLI did not run the commands:\n${run.stderr}`,
  );
  const answers = JSON.parse(run.stdout) as { code: number; stderr: string }[];
  assert.equal(answers.length, lines.length, run.stdout);
  return answers.map((answer, i) => ({ line: lines[i] as string, ...answer }));
}

/** Inputs that exercise quoting and every optional path, with two declared jobs. */
const AWKWARD = {
  ...REQUIRED,
  JOBS_MODULE: TWO_JOBS,
  RUN_KEY_SCOPE: `it's,"$HOME"*|@;\`x\`/prod`,
  RUN_KEY_SCOPE_HEADERS: 'X-Tenant',
  JOB_HEADERS: 'X-Tenant=acme corp',
  RUN_KEY_SCOPE_PARAMS: 'env',
  JOB_QUERY: 'env=prod&x=1',
  FIRESTORE_TIMEOUT_SECONDS: '20',
};

const CHANNEL = 'projects/my-project/notificationChannels/123';

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
      7,
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

/** The calls whose words start with `prefix`. */
function callsOf(calls: string[][], ...prefix: string[]): string[][] {
  return calls.filter((argv) => prefix.every((word, i) => argv[i] === word));
}

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

/**
 * The Python and the library of the SDK that the `gcloud` on PATH belongs to, and the lines that
 * put that library on `sys.path` (with `json` and `sys` imported); undefined where that library is
 * not found (a packaged gcloud without its sources).
 */
function gcloudSdk():
  | { sdk: string; python: string; prelude: string[] }
  | undefined {
  if (GCLOUD === undefined) {
    return undefined;
  }
  const sdk = path.resolve(path.dirname(realpathSync(GCLOUD)), '..');
  const bundled = path.join(sdk, 'platform/bundledpythonunix/bin/python3');
  const python =
    process.env.CLOUDSDK_PYTHON ?? (existsSync(bundled) ? bundled : 'python3');
  if (
    !existsSync(path.join(sdk, 'lib/googlecloudsdk/calliope/arg_parsers.py'))
  ) {
    return undefined;
  }
  const prelude = [
    'import json, sys',
    `sys.path[:0] = [${JSON.stringify(path.join(sdk, 'lib'))}, ${JSON.stringify(path.join(sdk, 'lib/third_party'))}]`,
  ];
  return { sdk, python, prelude };
}

/**
 * Runs Python `code` with gcloud's own library ({@link gcloudSdk}), `args` in `sys.argv[1:]`.
 * Skips the test where that library is not found.
 */
function gcloudPython(
  t: { skip: (message: string) => void },
  code: string[],
  args: string[],
): SpawnSyncReturns<string> | undefined {
  const found = gcloudSdk();
  if (found === undefined) {
    t.skip(`gcloud's Python library is not under the SDK of ${GCLOUD}`);
    return undefined;
  }
  return spawnSync(
    found.python,
    ['-c', [...found.prelude, ...code].join('\n'), ...args],
    {
      encoding: 'utf8',
      timeout: CHILD_TIMEOUT_MS,
    },
  );
}

describe('the real gcloud parser', () => {
  it('refuses a wrong flag with a usage error, not the account error', {
    skip: !HAS_GCLOUD && NO_GCLOUD,
  }, async () => {
    const line = deploy(REQUIRED).lines.find((l) =>
      l.includes(' scheduler jobs create http '),
    ) as string;

    const lines = [line, `${line} --update-headers=X-Tenant=acme`];
    const [good, wrong] = await parseAll(lines);
    const binary = await parseEach(lines);

    assert.deepEqual(
      binary.map((r) => [r.code, r.stderr]),
      [good, wrong].map((r) => [r?.code, r?.stderr]),
      'the loaded CLI answers as the gcloud binary does',
    );
    assert.equal(good?.code, 1, good?.stderr);
    assert.match(good?.stderr ?? '', NO_ACCOUNT);
    assert.equal(wrong?.code, 2, wrong?.stderr);
    assert.match(
      wrong?.stderr ?? '',
      /unrecognized arguments: --update-headers/,
    );
    assert.doesNotMatch(wrong?.stderr ?? '', NO_ACCOUNT);
  });

  it('accepts every command of the dry run, create and update paths', {
    skip: !HAS_GCLOUD && NO_GCLOUD,
  }, async (t) => {
    const lines = new Set([
      ...deploy(REQUIRED).lines,
      ...deploy(AWKWARD).lines,
      ...deploy(AWKWARD, ['--dry-run', '--assume-existing', '--prune']).lines,
      ...deploy({ ...REQUIRED, AUTH_MODE: 'verify-oidc' }).lines,
      ...deploy({ ...AWKWARD, ALERT_CHANNELS: CHANNEL }).lines,
    ]);

    const results = await parseAll(distinctShapes([...lines]));

    const refused = results.filter(
      (r) => r.code !== 1 || !NO_ACCOUNT.test(r.stderr),
    );
    assert.deepEqual(
      refused.map((r) => `exit ${r.code}: ${r.line}\n${r.stderr.trim()}`),
      [],
    );
    assert.ok(results.length >= 15, `only ${results.length} commands`);
    t.diagnostic(`${results.length} commands parsed`);
  });

  it('accepts the pause and resume commands npm run pause and resume run', {
    skip: !HAS_GCLOUD && NO_GCLOUD,
  }, async () => {
    const ref = {
      jobId: 'nightly_report-1',
      location: 'us-central1',
      project: 'my-project',
    };
    const lines = (['pause', 'resume'] as const).map((verb) =>
      shellLine(['gcloud', ...schedulerPauseArgs(verb, ref)]),
    );

    const results = await parseAll([
      ...lines,
      `${lines[0]} --paused-until=tomorrow`,
    ]);

    assert.deepEqual(
      results.slice(0, 2).map((r) => [r.code, NO_ACCOUNT.test(r.stderr)]),
      [
        [1, true],
        [1, true],
      ],
      results.map((r) => r.stderr).join('\n'),
    );
    assert.equal(
      results[2]?.code,
      2,
      'a flag gcloud does not know is refused: the check has teeth',
    );
  });

  it("reads the dashboard file into gcloud's own Dashboard message with no field it does not know", {
    skip: !HAS_GCLOUD && NO_GCLOUD,
  }, (t) => {
    const file = flag(
      command(
        deploy(REQUIRED).lines,
        'gcloud',
        'monitoring',
        'dashboards',
        'create',
      ),
      '--config-from-file',
    ) as string;
    const broken = path.join(scratch, 'dashboard-broken.json');
    writeFileSync(
      broken,
      readFileSync(file, 'utf8').replace('STACKED_BAR', 'STACKED_BARS'),
    );
    // gcloud's parser (apitools) keeps an unknown field or enum value aside instead of refusing
    // it, and the API would then refuse the dashboard: this walks the message for any.
    const check = [
      'from apitools.base.py import encoding',
      'from googlecloudsdk.api_lib.util import apis',
      'from googlecloudsdk.core import yaml',
      "messages = apis.GetMessagesModule('monitoring', 'v1')",
      'def unknown(msg, at):',
      "  out = [at + '.' + name for name in msg.all_unrecognized_fields()]",
      '  for field in msg.all_fields():',
      '    value = getattr(msg, field.name)',
      '    for v in (value if field.repeated else [value]):',
      "      if hasattr(v, 'all_unrecognized_fields'): out.extend(unknown(v, at + '.' + field.name))",
      '  return out',
      'for file in sys.argv[1:]:',
      '  board = encoding.PyValueToMessage(messages.Dashboard, yaml.load(open(file).read()))',
      "  print(json.dumps(sorted(set(unknown(board, 'dashboard')))))",
    ];

    const parsed = gcloudPython(t, check, [file, broken]);

    if (parsed === undefined) {
      return;
    }
    assert.equal(parsed.status, 0, parsed.stderr);
    const [good, bad] = parsed.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as string[]);
    assert.deepEqual(good, []);
    assert.deepEqual(bad, [
      'dashboard.gridLayout.widgets.xyChart.dataSets.plotType',
    ]);
  });

  it("reads --set-env-vars into exactly the function's variables", {
    skip: !HAS_GCLOUD && NO_GCLOUD,
  }, (t) => {
    const value = flag(
      command(deploy(AWKWARD).lines, 'gcloud', 'functions', 'deploy'),
      '--set-env-vars',
    );

    const parsed = gcloudPython(
      t,
      [
        'from googlecloudsdk.calliope import arg_parsers',
        'print(json.dumps(arg_parsers.ArgDict()(sys.argv[1])))',
      ],
      [value ?? ''],
    );

    if (parsed === undefined) {
      return;
    }
    assert.equal(parsed.status, 0, parsed.stderr);
    const env = JSON.parse(parsed.stdout) as Record<string, string>;
    assert.equal(env.RUN_KEY_SCOPE, AWKWARD.RUN_KEY_SCOPE);
    assert.deepEqual(env, Object.fromEntries(gcloudDict(value ?? '')));
  });

  it("lists exactly the jobs that call the function's URL, with gcloud's own filter", {
    skip: !HAS_GCLOUD && NO_GCLOUD,
  }, (t) => {
    const url = 'https://scheduled-job-abc123-uc.a.run.app';
    const fake = cloudGcloud();
    const run = deploy(REQUIRED, [], fake);
    const filter = flag(
      callsOf(run.gcloudCalls, 'gcloud', 'scheduler', 'jobs', 'list')[0] ?? [],
      '--filter',
    );
    const uris = [
      url,
      `${url}/`,
      `${url}?env=prod`,
      `${url}/?env=prod`,
      `${url}X`,
      `${url}.example.com`,
      'https://scheduled-job-abc123-ucXaXrunXapp',
      'https://other-abc123-uc.a.run.app',
    ];

    const evaluated = gcloudPython(
      t,
      [
        'from googlecloudsdk.core.resource import resource_filter',
        'matches = resource_filter.Compile(sys.argv[1])',
        "print(json.dumps([matches.Evaluate({'httpTarget': {'uri': u}}) for u in sys.argv[2:]]))",
      ],
      [filter ?? '', ...uris],
    );

    if (evaluated === undefined) {
      return;
    }
    assert.equal(evaluated.status, 0, evaluated.stderr);
    assert.equal(FUNCTION_URL, url);
    assert.deepEqual(JSON.parse(evaluated.stdout), [
      true,
      true,
      true,
      true,
      false,
      false,
      false,
      false,
    ]);
  });

  it("uploads the starter's sources and lockfile with the library's, and leaves tests and local state out", {
    skip:
      (!HAS_GCLOUD && NO_GCLOUD) ||
      (!existsSync(STARTER_ROOT_GCLOUDIGNORE) && NOT_IN_REPOSITORY),
  }, () => {
    const config = mkdtempSync(path.join(scratch, 'gcloud-'));

    const result = spawnSync('gcloud', ['meta', 'list-files-for-upload', '.'], {
      stdio: NO_STDIN,
      cwd: path.dirname(STARTER_ROOT_GCLOUDIGNORE),
      encoding: 'utf8',
      env: gcloudEnv(config),
      timeout: CHILD_TIMEOUT_MS,
    });

    assert.equal(result.status, 0, result.stderr);
    const files = result.stdout.split('\n').filter((f) => f !== '');
    for (const kept of [
      'package.json',
      'package-lock.json',
      'tsconfig.json',
      'tsconfig.build.json',
      'src/index.ts',
      'src/jobs.ts',
      'packages/scheduler-run-once/package.json',
      'packages/scheduler-run-once/tsconfig.json',
      'packages/scheduler-run-once/tsconfig.build.json',
      'packages/scheduler-run-once/src/index.ts',
      'packages/scheduler-run-once/src/core/ledger.ts',
    ]) {
      assert.ok(files.includes(kept), `${kept} is not uploaded`);
    }
    const leaked = files.filter((f) =>
      /^((packages\/scheduler-run-once\/)?(test|node_modules|build|dist|bench|scripts|ops|docs)|\.ci|\.git|\.emulator)\//.test(
        f,
      ),
    );
    assert.deepEqual(leaked, []);
  });
});

/** A `node` that says it is `version`, for the Node version check. */
function fakeNode(version: string): string {
  const bin = mkdtempSync(path.join(scratch, 'node-'));
  writeFileSync(
    path.join(bin, 'node'),
    `#!/usr/bin/env bash\necho ${version}\n`,
  );
  chmodSync(path.join(bin, 'node'), 0o755);
  return path.join(bin, 'node');
}

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
        /RETENTION_SECONDS \(7000\) must exceed the judging delay of job scheduled-job plus its forced-run tolerance \(7380 s/,
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

  for (const { name, inputs, says } of cases) {
    for (const args of [['--dry-run'], []]) {
      it(`refuses ${name}${args.length > 0 ? ' (dry run)' : ''}`, () => {
        const run = deploy(inputs, args);

        assert.equal(run.status, 2, run.stderr);
        for (const message of says) {
          assert.match(run.stderr, message);
        }
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
    for (const args of [['--dry-run'], []]) {
      it(`refuses ${name} before any command${args.length > 0 ? ' (dry run)' : ''}`, () => {
        const run = deploy({ ...REQUIRED, ...inputs }, args);

        assert.equal(run.status, 2, run.stderr);
        assert.match(run.stderr, says);
        assert.deepEqual(run.gcloudCalls, []);
      });
    }
  }

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
