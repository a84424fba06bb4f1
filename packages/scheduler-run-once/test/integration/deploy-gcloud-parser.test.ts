/**
 * deploy.sh's printed commands pass the real gcloud's parser (no account, no network). Needs no account and no network: gcloud runs under a throwaway configuration.
 * The shared harness: `test/fixtures/deploy-harness.ts`. The jobs come from fixture modules
 * (`JOBS_MODULE`), never from a user's src/jobs.ts.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import {
  schedulerPauseArgs,
  shellLine,
} from '../../src/ops/scheduler-pause.ts';
import {
  AWKWARD,
  CATCH_UP_JOBS,
  CHANNEL,
  CHILD_TIMEOUT_MS,
  callsOf,
  cloudGcloud,
  command,
  deploy,
  distinctShapes,
  FUNCTION_URL,
  flag,
  gcloudDict,
  gcloudEnv,
  gcloudPython,
  HAS_GCLOUD,
  NO_ACCOUNT,
  NO_GCLOUD,
  NO_STDIN,
  NOT_IN_REPOSITORY,
  parseAll,
  parseEach,
  REQUIRED,
  STARTER_ROOT_GCLOUDIGNORE,
  scratch,
} from '../fixtures/deploy-harness.ts';
import { STARTER_CHECKS_SKIP } from '../fixtures/starter-checkout.ts';

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
      ...deploy({ ...REQUIRED, JOBS_MODULE: CATCH_UP_JOBS }).lines,
      ...deploy({
        ...AWKWARD,
        JOBS_MODULE: CATCH_UP_JOBS,
        AUTH_MODE: 'verify-oidc',
      }).lines,
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
      STARTER_CHECKS_SKIP ||
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
