/**
 * The package as npm publishes it: `npm pack` of the library (the `dist/` that `npm run build`
 * made; `npm test` builds first), its file list checked, then installed from the tarball into an
 * empty project outside the repository, the way a user installs it from the registry. That
 * project's `index.ts` imports 'scheduler-run-once' only; TypeScript checks it against the shipped
 * declarations, Node strips its types (it is not under `node_modules`), and the project's own
 * functions-framework serves it on the Firestore emulator. The installs run with
 * `--prefer-offline`: npm's cache, filled when this repository was installed, serves the
 * dependencies. Nothing here writes to the repository, its `node_modules` included.
 */
import assert from 'node:assert/strict';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  binPath,
  freshCollection,
  type GroupProcess,
} from '../../src/dev/local-processes.ts';
import {
  deliver,
  npmIn,
  outsideEnv,
  runIn,
  serveFrom,
} from '../fixtures/installed-project.ts';
import { documents, PAST_NOON, schedulerHeaders } from '../helpers.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const NPM_TIMEOUT_MS = 60_000;
/** A bound on the function's start, which shares the machine with the project's type check. */
const FUNCTION_START_MS = 30_000;
/** The project's `index.ts`, a user's whole function: one job, registered as deployed. */
const INDEX_TS = `import { defineJob, registerScheduledJob } from 'scheduler-run-once';

const packedJob = defineJob({
  id: 'packed-job',
  schedule: '* * * * *',
  run: async (ctx) => {
    ctx.logger.info({ runId: ctx.runId }, 'packed job ran');
  },
});

registerScheduledJob('handleScheduledJob', [packedJob]);
`;
/** The project's `src/jobs.ts`, which `run-once` reads: the same job, declared for the commands. */
const JOBS_TS = `import { defineJob } from 'scheduler-run-once';

export const jobs = [defineJob({ id: 'packed-job', schedule: '* * * * *', run: () => {} })];
`;
/** Strict, no emit, no `@types` (the index uses no Node API): does the shipped `types` entry do? */
const TSCONFIG = {
  compilerOptions: {
    module: 'nodenext',
    moduleResolution: 'nodenext',
    target: 'es2024',
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
  },
  include: ['index.ts'],
};

/** What `npm pack --json` reports of one tarball. */
interface Packed {
  filename: string;
  files: { path: string }[];
}

/**
 * The paths of `files` that a published package should not hold: anything but the manifest, the
 * README, LICENSE, CHANGELOG, docs, the `run-once` command (`bin/`), `deploy.sh` and the compiled
 * `dist/` (JavaScript and declarations, no source
 * maps: the sources they point to do not ship), and any `dist/` file that is not the output of a
 * `src/` module (a stale build of tests, bench or scripts).
 */
function unexpectedFiles(files: readonly string[]): string[] {
  const allowed =
    /^(package\.json|README\.md|LICENSE|CHANGELOG\.md|deploy\.sh|bin\/[\w-]+\.cjs|docs\/[\w-]+\.md|dist\/.+\.(c?js|d\.c?ts))$/;
  return files.filter((file) => {
    if (!allowed.test(file)) {
      return true;
    }
    if (!file.startsWith('dist/')) {
      return false;
    }
    const source = file
      .replace(/^dist\//, 'src/')
      .replace(/\.(js|d\.ts)$/, '.ts')
      .replace(/\.(cjs|d\.cts)$/, '.cts');
    return !existsSync(path.join(ROOT, source));
  });
}

describe('the package as published, installed in a project of its own', {
  skip:
    !existsSync(path.join(ROOT, 'dist/index.js')) &&
    'run `npm run build` first',
}, () => {
  const scratch = mkdtempSync(path.join(tmpdir(), 'run-once-pack-'));
  const project = path.join(scratch, 'project');
  const children: GroupProcess[] = [];
  let packed: Packed;
  const timings: Record<string, number> = {};

  before(async () => {
    const pack = await npmIn(
      ROOT,
      ['pack', '--ignore-scripts', '--json', '--pack-destination', scratch],
      { env: outsideEnv(), timeoutMs: NPM_TIMEOUT_MS },
    );
    timings.pack = pack.ms;
    [packed] = JSON.parse(pack.stdout) as [Packed];
  });

  after(() => {
    for (const child of children) {
      child.signalGroup('SIGKILL');
    }
    rmSync(scratch, { recursive: true, force: true });
    console.log(`pack.test timings (ms): ${JSON.stringify(timings)}`);
  });

  it('ships the compiled entry, its declarations, LICENSE and CHANGELOG, and no tests, bench or source maps', () => {
    const files = packed.files.map((file) => file.path);

    for (const needed of [
      'dist/index.js',
      'dist/index.d.ts',
      'LICENSE',
      'CHANGELOG.md',
      'README.md',
    ]) {
      assert.ok(files.includes(needed), `${needed} is not in the tarball`);
    }
    assert.deepEqual(unexpectedFiles(files), []);
  });

  it('installs from the tarball, type-checks a user’s index.ts, and serves it: processed, then duplicate', async () => {
    const frameworkVersion = (
      JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
        dependencies: Record<string, string>;
      }
    ).dependencies['@google-cloud/functions-framework'];
    const manifest = {
      name: 'packed-project',
      private: true,
      type: 'module',
      main: 'index.ts',
      scripts: { start: 'functions-framework --target=handleScheduledJob' },
      dependencies: {
        '@google-cloud/functions-framework': frameworkVersion,
        'scheduler-run-once': `file:${path.join(scratch, packed.filename)}`,
      },
    };
    mkdirSync(project);
    writeFileSync(
      path.join(project, 'package.json'),
      `${JSON.stringify(manifest, null, 2)}\n`,
    );
    writeFileSync(path.join(project, 'index.ts'), INDEX_TS);
    writeFileSync(
      path.join(project, 'tsconfig.json'),
      JSON.stringify(TSCONFIG),
    );

    const install = await npmIn(
      project,
      ['install', '--prefer-offline', '--no-audit', '--no-fund', '--quiet'],
      { env: outsideEnv(), timeoutMs: NPM_TIMEOUT_MS },
    );
    timings.install = install.ms;
    const collection = freshCollection();
    const started = performance.now();
    // The type check and the function's start need only the install: side by side.
    const checking = runIn(project, binPath('tsc'), ['-p', '.'], {
      env: outsideEnv(),
      timeoutMs: NPM_TIMEOUT_MS,
    });
    const serving = serveFrom(project, {
      target: 'handleScheduledJob',
      // A year's retention, far beyond the schedule time delivered (a day back, PAST_NOON); that
      // slot's earlier slots never ran: no missed-run reports. Error text in the answers.
      env: outsideEnv({
        METADATA_SERVER_DETECTION: 'none',
        GOOGLE_CLOUD_PROJECT:
          process.env.GOOGLE_CLOUD_PROJECT ?? 'demo-scheduler-run-once',
        RUNS_COLLECTION: collection,
        MISSED_RUN_CHECK: 'off',
        RETENTION_SECONDS: '31536000',
        EXPOSE_ERRORS: 'true',
      }),
      timeoutMs: FUNCTION_START_MS,
    });
    const [typecheck, { fn, url }] = await Promise.all([checking, serving]);
    children.push(fn);
    timings.typecheck = typecheck.ms;
    timings.start = Math.round(performance.now() - started);
    const headers = schedulerHeaders('packed-job', PAST_NOON);

    const first = await deliver(url, headers);
    const second = await deliver(url, headers);

    assert.equal(typecheck.code, 0, `tsc in the project:\n${typecheck.output}`);
    assert.ok(
      existsSync(
        path.join(project, 'node_modules/scheduler-run-once/dist/index.js'),
      ),
      `the tarball is not installed:\n${install.output}`,
    );
    assert.deepEqual(
      [first.status, first.outcome],
      [200, 'processed'],
      `${first.body}\n${fn.output()}`,
    );
    assert.deepEqual(
      [second.status, second.outcome],
      [200, 'duplicate'],
      second.body,
    );
    const records = [...(await documents(collection)).values()];
    assert.deepEqual(
      records.map((record) => record.status),
      ['completed'],
    );
    assert.match(fn.output(), /packed job ran/);
  });

  it('runs the installed run-once command from node_modules: jobs --json, and deploy --dry-run', async () => {
    assert.ok(
      existsSync(path.join(project, 'node_modules')),
      'the install test runs first',
    );
    mkdirSync(path.join(project, 'src'), { recursive: true });
    writeFileSync(path.join(project, 'src/jobs.ts'), JOBS_TS);
    const runOnce = path.join(project, 'node_modules/.bin/run-once');
    const env = outsideEnv({
      GOOGLE_CLOUD_PROJECT: 'my-project',
      REGION: 'us-central1',
    });

    // Two commands that only read the project: side by side.
    const [jobs, deploy] = await Promise.all([
      runIn(project, runOnce, ['jobs', '--json'], {
        env,
        timeoutMs: NPM_TIMEOUT_MS,
      }),
      runIn(project, runOnce, ['deploy', '--dry-run'], {
        env,
        timeoutMs: NPM_TIMEOUT_MS,
      }),
    ]);

    assert.equal(jobs.code, 0, jobs.output);
    assert.deepEqual(
      (JSON.parse(jobs.stdout) as { id: string }[]).map((job) => job.id),
      ['packed-job'],
    );
    assert.equal(deploy.code, 0, deploy.output);
    assert.match(deploy.stdout, /^gcloud functions deploy /m);
    assert.match(
      deploy.stdout,
      /^gcloud scheduler jobs create http packed-job /m,
    );
  });

  it('says in one line that run-once dev needs TypeScript, in a project without it', async () => {
    assert.ok(
      existsSync(path.join(project, 'src/jobs.ts')),
      'the run-once test runs first',
    );
    const runOnce = path.join(project, 'node_modules/.bin/run-once');

    const dev = await runIn(project, runOnce, ['dev'], {
      env: outsideEnv({ METADATA_SERVER_DETECTION: 'none' }),
      timeoutMs: NPM_TIMEOUT_MS,
    });

    assert.equal(dev.code, 1, dev.output);
    assert.equal(
      dev.output,
      'dev: npm run dev builds src/ with TypeScript, which is not installed here: npm install --save-dev typescript\n',
    );
  });
});
