/**
 * `run-once`, the package's command (`bin/run-once.cjs`): the subcommands, `--help` on each that
 * explains every flag its usage names, the exit statuses, and `--json` alone on stdout. Run as a
 * user runs it, as a process in a project like the starter.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { COMMAND_HELP } from '../../src/cli/help.ts';
import { USAGE as JOBS_USAGE } from '../../src/ops/jobs.ts';
import { USAGE as PAUSE_USAGE } from '../../src/ops/pause.ts';
import { USAGE as RUNS_USAGE } from '../../src/ops/runs.ts';
import { USAGE as SCHEDULER_USAGE } from '../../src/ops/scheduler.ts';
import { USAGE as TRIGGER_USAGE } from '../../src/ops/trigger.ts';
import { writeStarterProject } from '../fixtures/starter-project.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const BIN = path.join(ROOT, 'bin/run-once.cjs');
const PROJECT = writeStarterProject(
  mkdtempSync(path.join(tmpdir(), 'run-once-cli-')),
);
after(() => rmSync(PROJECT, { recursive: true, force: true }));

/** `run-once ...args` in the starter-like project, with this test's Node. */
function runOnce(...args: string[]) {
  return spawnSync(process.execPath, [BIN, ...args], {
    cwd: PROJECT,
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', METADATA_SERVER_DETECTION: 'none' },
    timeout: 60_000,
  });
}

/**
 * `run-once ...args` in a project of the test's own whose `src/jobs.ts` is `jobsSource` (none when
 * undefined), removed afterwards.
 */
function runOnceWithJobs(jobsSource: string | undefined, ...args: string[]) {
  const project = mkdtempSync(path.join(tmpdir(), 'run-once-cli-jobs-'));
  try {
    writeFileSync(path.join(project, 'package.json'), '{"type":"module"}\n');
    if (jobsSource !== undefined) {
      mkdirSync(path.join(project, 'src'));
      writeFileSync(path.join(project, 'src/jobs.ts'), jobsSource);
    }
    return spawnSync(process.execPath, [BIN, ...args], {
      cwd: project,
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '', METADATA_SERVER_DETECTION: 'none' },
      timeout: 60_000,
    });
  } finally {
    rmSync(project, { recursive: true, force: true });
  }
}

/** The `--flag` names a usage text mentions. */
function flagsOf(usage: string): string[] {
  return [...new Set([...usage.matchAll(/--[a-z][a-z-]*/g)].map((m) => m[0]))];
}

describe('run-once', () => {
  it('lists its commands on --help and exits 0; with no command it exits 2 on stderr', () => {
    const help = runOnce('--help');
    const bare = runOnce();

    assert.equal(help.status, 0, help.stderr);
    for (const name of Object.keys(COMMAND_HELP)) {
      assert.match(
        help.stdout,
        new RegExp(`^  ${name} `, 'm'),
        `${name} is not listed`,
      );
    }
    assert.equal(bare.status, 2);
    assert.equal(bare.stdout, '');
    assert.match(bare.stderr, /Usage: run-once COMMAND/);
  });

  it('refuses an unknown command with exit 2, naming it', () => {
    const result = runOnce('rnus');

    assert.equal(result.status, 2);
    assert.match(result.stderr, /no command "rnus"/);
  });

  const usages: Record<string, string> = {
    jobs: JOBS_USAGE,
    runs: RUNS_USAGE,
    trigger: TRIGGER_USAGE,
    pause: PAUSE_USAGE.split('\n')[0] ?? '',
    scheduler: SCHEDULER_USAGE,
  };
  for (const [name, usage] of Object.entries(usages)) {
    it(`${name} --help explains every flag of its usage, and exits 0`, () => {
      const result = runOnce(name, '--help');

      assert.equal(result.status, 0, result.stderr);
      const unexplained = flagsOf(usage).filter(
        (flag) =>
          !new RegExp(`^\\s+(-\\w, )?${flag}\\b`, 'm').test(result.stdout),
      );
      assert.deepEqual(
        unexplained,
        [],
        `${name} --help leaves these flags unexplained`,
      );
      assert.match(result.stdout, /^Exit status:/m);
    });
  }

  it('prints jobs --json alone on stdout: it parses as JSON', () => {
    const result = runOnce('jobs', '--json');

    assert.equal(result.status, 0, result.stderr);
    const jobs = JSON.parse(result.stdout) as { id: string }[];
    assert.deepEqual(
      jobs.map((job) => job.id),
      ['scheduled-job', 'run-audit'],
    );
  });

  it("prints the package's version", () => {
    const { version } = JSON.parse(
      readFileSync(path.join(ROOT, 'package.json'), 'utf8'),
    );

    const result = runOnce('version');

    assert.equal(result.status, 0);
    assert.equal(result.stdout.trim(), version);
  });

  it('passes a bad argument on to the command: exit 2 with its usage', () => {
    const result = runOnce('jobs', '--count', 'many');

    assert.equal(result.status, 2);
    assert.match(result.stderr, /usage: run-once jobs/);
  });
});

describe("deploy.sh's own steps", () => {
  for (const step of ['indexes', 'alerts']) {
    it(`src/ops/${step}.ts --help prints its usage and exits 0; an unknown flag exits 2`, () => {
      const script = path.join(ROOT, `src/ops/${step}.ts`);
      const help = spawnSync(process.execPath, [script, '--help'], {
        encoding: 'utf8',
      });
      const bad = spawnSync(process.execPath, [script, '--bogus'], {
        encoding: 'utf8',
      });

      assert.equal(help.status, 0, help.stderr);
      assert.match(
        help.stdout,
        new RegExp(`^usage: node src/ops/${step}\\.ts`),
      );
      assert.equal(bad.status, 2, bad.stderr);
      assert.match(bad.stderr, /Unknown option '--bogus'/);
    });
  }

  it('outside a project (no src/jobs.ts) says where it looked and what to do, in one line', () => {
    const result = runOnceWithJobs(undefined, 'jobs');

    assert.equal(result.status, 1);
    assert.equal(result.stdout, '');
    assert.match(
      result.stderr,
      /^jobs: no src\/jobs\.ts in .+: run the command in your project's directory .+\n$/,
    );
  });

  const brokenModules: Record<string, { source: string; says: RegExp }> = {
    'throws at import': {
      source: "const n = 1;\nthrow new Error('no API key');\n",
      says: /src\/jobs\.ts failed to load: no API key \(at src\/jobs\.ts:2:7\)/,
    },
    'does not parse': {
      source: 'export const jobs = [ ;\n',
      says: /src\/jobs\.ts failed to load: .+ \(at src\/jobs\.ts:1\)/,
    },
    'imports a missing file': {
      source: "import { job } from './gone.ts';\nexport const jobs = [job];\n",
      says: /src\/jobs\.ts failed to load: Cannot find module '.+gone\.ts'/,
    },
  };
  for (const [what, { source, says }] of Object.entries(brokenModules)) {
    it(`names a src/jobs.ts that ${what} in one line, without a stack`, () => {
      const result = runOnceWithJobs(source, 'runs', '--json');

      assert.equal(result.status, 1);
      assert.equal(result.stdout, '');
      assert.match(result.stderr, says);
      assert.match(
        result.stderr,
        /`node src\/jobs\.ts` shows the whole error\n$/,
      );
      assert.equal(result.stderr.split('\n').length, 2, result.stderr);
    });
  }

  it('dev refuses a bad argument with exit 2 and its usage, as every command does', () => {
    const unknown = runOnce('dev', '--nope');
    const badRate = runOnce('dev', '--drop-answers', '2');

    for (const result of [unknown, badRate]) {
      assert.equal(result.status, 2, result.stderr);
      assert.match(result.stderr, /^dev: .+\nusage: run-once dev /);
    }
  });

  it('dev refuses a PORT that is not a port with exit 2, before it starts anything', () => {
    const result = spawnSync(process.execPath, [BIN, 'dev'], {
      cwd: PROJECT,
      encoding: 'utf8',
      env: {
        PATH: process.env.PATH ?? '',
        METADATA_SERVER_DETECTION: 'none',
        PORT: 'abc',
      },
      timeout: 60_000,
    });

    assert.equal(result.status, 2, result.stderr);
    assert.match(result.stderr, /^dev: PORT="abc" is not a port: /);
  });

  it('dev outside a project says so in one line, before it starts the emulator', () => {
    const result = runOnceWithJobs(undefined, 'dev');

    assert.equal(result.status, 1, result.stderr);
    assert.equal(result.stdout, '');
    assert.match(
      result.stderr,
      /^dev: no src\/jobs\.ts in .+: run npm run dev in your project's directory .+\n$/,
    );
  });

  /**
   * `run-once` from a copy of the package's `bin/` under `node_modules/scheduler-run-once/` (as
   * npm installs it), whose `dist/` holds only `files` (path to contents): an install that lost
   * its build, or a dependency.
   */
  function runInstalledCopy(files: Record<string, string>) {
    const scratch = mkdtempSync(path.join(tmpdir(), 'run-once-cli-install-'));
    const installed = path.join(scratch, 'node_modules/scheduler-run-once');
    try {
      mkdirSync(path.join(installed, 'bin'), { recursive: true });
      for (const file of [
        'bin/run-once.cjs',
        'bin/check-node.cjs',
        'package.json',
      ]) {
        writeFileSync(
          path.join(installed, file),
          readFileSync(path.join(ROOT, file)),
        );
      }
      for (const [file, contents] of Object.entries(files)) {
        mkdirSync(path.dirname(path.join(installed, file)), {
          recursive: true,
        });
        writeFileSync(path.join(installed, file), contents);
      }
      return spawnSync(
        process.execPath,
        [path.join(installed, 'bin/run-once.cjs'), 'version'],
        {
          cwd: scratch,
          encoding: 'utf8',
          env: { PATH: process.env.PATH ?? '' },
          timeout: 60_000,
        },
      );
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  }

  it('says in one line that an install without dist/ must be reinstalled', () => {
    const result = runInstalledCopy({});

    assert.equal(result.status, 1);
    assert.match(
      result.stderr,
      /^run-once: this install of scheduler-run-once \(.+\) has no dist\/: reinstall it .+\n$/,
    );
  });

  it('says in one line which dependency an install lacks, and to run npm install', () => {
    const result = runInstalledCopy({
      'dist/cli/run-once.js':
        "import 'croner-not-installed';\nexport async function main() { return 0; }\n",
    });

    assert.equal(result.status, 1);
    assert.match(
      result.stderr,
      /^run-once: scheduler-run-once cannot load croner-not-installed, .+: run npm install in your project.*\n$/,
    );
  });

  it('shows an undeclared job id that is empty or holds control characters quoted and escaped', () => {
    const empty = runOnce('trigger', '');
    const withEscape = runOnce('trigger', 'a\u001b[31mb');

    assert.equal(empty.status, 2);
    assert.match(empty.stderr, /^trigger: no declared job "" \(declared: /);
    assert.equal(withEscape.status, 2);
    assert.match(
      withEscape.stderr,
      /^trigger: no declared job "a\\u001b\[31mb" \(declared: /,
    );
    assert.ok(!withEscape.stderr.includes('\u001b'), withEscape.stderr);
  });
});
