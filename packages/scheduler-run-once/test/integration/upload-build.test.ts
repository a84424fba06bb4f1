/**
 * The starter's upload, built as Cloud Build builds it and served as deployed. `./deploy.sh` runs
 * `gcloud functions deploy --source=.` in the repository's root (the starter, two levels above this
 * library), which uploads the files `gcloud meta list-files-for-upload` lists (`.gcloudignore`
 * applied). Google's Node.js buildpack then, in the uploaded directory:
 *
 * 1. installs with `npm ci --quiet --no-fund --no-audit` (a lockfile is there), with
 *    `NODE_ENV=development` when a build script exists, "to support the most use cases possible":
 *    dev dependencies included, so `tsc` is there;
 * 2. runs `npm run gcp-build` (the custom build step that replaces `npm run build`);
 * 3. removes the dev dependencies with `npm prune --production` (package.json has some, and
 *    `NODE_ENV` is production at run time);
 *
 * and the functions-framework buildpack serves the function named by the entry point from
 * package.json `main`. Sources: GoogleCloudPlatform/buildpacks, `cmd/nodejs/npm/lib/lib.go`
 * (`BuildFn`, `shouldPrune`); "NPM build scripts" in https://cloud.google.com/run/docs/runtimes/nodejs.
 *
 * Here: those files copied to a directory outside the repository, those three commands (npm's
 * cache serves the install: `--prefer-offline`), then functions-framework from the result with
 * `--target=handleScheduledJob` and `NODE_ENV=production`, on the Firestore emulator: one delivery,
 * processed. The upload's `src/jobs.ts`, the user's, is replaced by one test job, so this test
 * passes whatever jobs a user declares; `src/index.ts`, `src/main.cts` and the rest are built as
 * uploaded. A check of the starter as shipped: it runs with `RUN_ONCE_STARTER_CHECKS=1` (`.ci/run`
 * sets it), and is skipped, saying why, without it, where the library is not inside a starter
 * checkout, or where gcloud is not installed.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import {
  freshCollection,
  type GroupProcess,
} from '../../src/dev/local-processes.ts';
import {
  deliver,
  npmIn,
  outsideEnv,
  serveFrom,
} from '../fixtures/installed-project.ts';
import { STARTER_CHECKS_SKIP } from '../fixtures/starter-checkout.ts';
import { documents, PAST_NOON, schedulerHeaders } from '../helpers.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
/** The starter: the repository's root, which holds this library in `packages/scheduler-run-once`. */
const STARTER = path.resolve(ROOT, '../..');
const INSTALL_TIMEOUT_MS = 90_000;
const BUILD_TIMEOUT_MS = 60_000;
const FUNCTION_START_MS = 15_000;
/** The upload's `src/jobs.ts` in this test: one job, every minute, that logs. */
const TEST_JOBS_TS = `import { defineJob, type JobDeclaration } from 'scheduler-run-once';

export const jobs: readonly JobDeclaration[] = [
  defineJob({
    id: 'upload-build-job',
    schedule: '* * * * *',
    run: async (ctx) => {
      ctx.logger.info({ runId: ctx.runId }, 'upload build job ran');
    },
  }),
];
`;

/**
 * Why this does not run here, or `false`: it checks the starter as shipped (its package.json,
 * lockfile and .gcloudignore, which a user edits), so only where asked (`STARTER_CHECKS_SKIP`:
 * `.ci/run` asks), in a starter checkout around the library, with gcloud.
 */
function skipReason(): string | false {
  if (STARTER_CHECKS_SKIP !== false) {
    return STARTER_CHECKS_SKIP;
  }
  const manifest = path.join(STARTER, 'package.json');
  const workspaces = existsSync(manifest)
    ? ((JSON.parse(readFileSync(manifest, 'utf8')) as { workspaces?: string[] })
        .workspaces ?? [])
    : [];
  if (
    !workspaces.includes('packages/scheduler-run-once') ||
    !existsSync(path.join(STARTER, '.gcloudignore'))
  ) {
    return `${STARTER} is not a starter checkout (a package.json with the workspace packages/scheduler-run-once, and a .gcloudignore): there is no upload to build`;
  }
  const gcloud = spawnSync('bash', ['-c', 'command -v gcloud'], {
    stdio: 'ignore',
  });
  if (gcloud.status !== 0) {
    return 'gcloud is not installed: the upload cannot be listed';
  }
  return false;
}

/** An environment for gcloud with no account, no project, and no lookup of the metadata server. */
function gcloudEnv(config: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(outsideEnv())) {
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
    CLOUDSDK_CORE_CHECK_GCE_METADATA: 'false',
    CLOUDSDK_CORE_DISABLE_USAGE_REPORTING: 'true',
    CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK: 'true',
  };
}

/**
 * The files `gcloud functions deploy --source=.` uploads from the starter, relative to it.
 *
 * @throws with gcloud's error output when it fails.
 */
function listUpload(scratch: string): string[] {
  const config = mkdtempSync(path.join(scratch, 'gcloud-'));
  const listed = spawnSync('gcloud', ['meta', 'list-files-for-upload', '.'], {
    cwd: STARTER,
    env: gcloudEnv(config),
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    timeout: BUILD_TIMEOUT_MS,
  });
  if (listed.status !== 0) {
    throw new Error(
      `gcloud meta list-files-for-upload failed (${listed.status}):\n${listed.stderr}`,
    );
  }
  return listed.stdout.split('\n').filter((file) => file !== '');
}

/** Copies `files` (relative to the starter) into `dir`, keeping their paths. */
function copyUpload(files: readonly string[], dir: string): void {
  for (const file of files) {
    const target = path.join(dir, file);
    mkdirSync(path.dirname(target), { recursive: true });
    cpSync(path.join(STARTER, file), target);
  }
}

describe('the starter’s upload, built as the buildpack builds it', {
  skip: skipReason(),
}, () => {
  const scratch = mkdtempSync(path.join(tmpdir(), 'run-once-upload-'));
  const app = path.join(scratch, 'workspace');
  const children: GroupProcess[] = [];
  const timings: Record<string, number> = {};

  after(() => {
    for (const child of children) {
      child.signalGroup('SIGKILL');
    }
    rmSync(scratch, { recursive: true, force: true });
    console.log(`upload-build.test timings (ms): ${JSON.stringify(timings)}`);
  });

  it('installs, runs gcp-build, prunes, and serves a delivery from package.json main: processed', async () => {
    const listing = performance.now();
    copyUpload(listUpload(scratch), app);
    writeFileSync(path.join(app, 'src/jobs.ts'), TEST_JOBS_TS);
    timings.list = Math.round(performance.now() - listing);

    const install = await npmIn(
      app,
      ['ci', '--quiet', '--no-fund', '--no-audit', '--prefer-offline'],
      {
        env: outsideEnv({ NODE_ENV: 'development' }),
        timeoutMs: INSTALL_TIMEOUT_MS,
      },
    );
    timings.install = install.ms;
    const build = await npmIn(app, ['run', 'gcp-build'], {
      env: outsideEnv({
        NODE_ENV: 'production',
        METADATA_SERVER_DETECTION: 'none',
      }),
      timeoutMs: BUILD_TIMEOUT_MS,
    });
    timings.build = build.ms;
    const prune = await npmIn(app, ['prune', '--production'], {
      env: outsideEnv({ NODE_ENV: 'production' }),
      timeoutMs: BUILD_TIMEOUT_MS,
    });
    timings.prune = prune.ms;
    const collection = freshCollection();
    const starting = performance.now();
    const { fn, url } = await serveFrom(app, {
      target: 'handleScheduledJob',
      // As deployed (NODE_ENV=production); a year's retention, far beyond the schedule time
      // delivered (a day back), whose earlier slots never ran: no missed-run reports.
      env: outsideEnv({
        NODE_ENV: 'production',
        METADATA_SERVER_DETECTION: 'none',
        GOOGLE_CLOUD_PROJECT:
          process.env.GOOGLE_CLOUD_PROJECT ?? 'demo-scheduler-run-once',
        RUNS_COLLECTION: collection,
        MISSED_RUN_CHECK: 'off',
        RETENTION_SECONDS: '31536000',
      }),
      timeoutMs: FUNCTION_START_MS,
    });
    children.push(fn);
    timings.start = Math.round(performance.now() - starting);

    const answer = await deliver(
      url,
      schedulerHeaders('upload-build-job', PAST_NOON),
    );

    assert.deepEqual(
      [answer.status, answer.outcome],
      [200, 'processed'],
      `${answer.body}\n${fn.output()}`,
    );
    assert.ok(
      existsSync(path.join(app, 'build/.compile-cache')),
      'gcp-build filled no compile cache',
    );
    assert.ok(
      !existsSync(path.join(app, 'node_modules/typescript')),
      'npm prune left the dev dependencies',
    );
    const records = [...(await documents(collection)).values()];
    assert.deepEqual(
      records.map((record) => record.status),
      ['completed'],
    );
    assert.match(fn.output(), /upload build job ran/);
  });
});
