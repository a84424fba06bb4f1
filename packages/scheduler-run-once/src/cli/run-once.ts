/**
 * `run-once`, the package's command: the operations as subcommands (`run-once jobs|runs|trigger|
 * pause|resume|scheduler|dev|deploy …`), each with `--help`, with the exit statuses every
 * subcommand shares (`help.ts`). The package's `bin/run-once.cjs` checks Node's version, then loads
 * this module from the sources (a checkout) or from `dist/` (the published package).
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  DEV_USAGE,
  DevArgumentError,
  readDevArguments,
} from '../dev/dev-args.ts';
import { libraryModule, ROOT } from '../dev/local-processes.ts';
import { type CommandMain, commandStatus } from '../ops/command.ts';
import { COMMAND_HELP, OVERVIEW } from './help.ts';

/** Exit status for a bad argument (`help.ts`, "Exit status"). */
const EXIT_BAD_ARGUMENT = 2;

/** An operations command as a module exports it. */
interface CommandModule {
  readonly USAGE: string;
  readonly main: CommandMain;
}

/** The subcommands that run an operations command in this process, with what goes before its flags. */
const IN_PROCESS: Readonly<
  Record<string, { module: string; leading: readonly string[] }>
> = {
  jobs: { module: 'ops/jobs', leading: [] },
  runs: { module: 'ops/runs', leading: [] },
  trigger: { module: 'ops/trigger', leading: [] },
  pause: { module: 'ops/pause', leading: ['pause'] },
  resume: { module: 'ops/pause', leading: ['resume'] },
  scheduler: { module: 'ops/scheduler', leading: [] },
};

/** Whether `args` ask for help. */
function asksForHelp(args: readonly string[]): boolean {
  return args.includes('--help') || args.includes('-h');
}

/** The package's version, from its package.json. */
function version(): string {
  const packageJson = JSON.parse(
    readFileSync(join(ROOT, 'package.json'), 'utf8'),
  ) as {
    version: string;
  };
  return packageJson.version;
}

/**
 * Runs `command` with `args` in a child process that shares this terminal, and resolves to its
 * exit status. Ctrl-C reaches the child from the terminal itself: this process waits for it.
 */
function runChild(command: string, args: readonly string[]): Promise<number> {
  const child = spawn(command, args, { stdio: 'inherit' });
  const ignoreInterrupt = () => {};
  process.on('SIGINT', ignoreInterrupt);
  return new Promise((resolve) => {
    child.on('error', (err) => {
      console.error(`run-once: could not start ${command}: ${err.message}`);
      resolve(1);
    });
    child.on('exit', (code, signal) => {
      process.off('SIGINT', ignoreInterrupt);
      resolve(code ?? (signal === null ? 1 : 128 + 2));
    });
  });
}

/** Runs an operations command in this process: its module's `main` under {@link commandStatus}. */
async function runInProcess(
  name: string,
  args: readonly string[],
): Promise<number> {
  const spec = IN_PROCESS[name];
  if (spec === undefined) {
    return EXIT_BAD_ARGUMENT;
  }
  const url = pathToFileURL(libraryModule(spec.module)).href;
  const module = (await import(url)) as CommandModule;
  const argv = [...spec.leading, ...args];
  return commandStatus(name, module.USAGE, module.main, argv, process.env);
}

/**
 * `run-once dev` in a process of its own, once its arguments are checked here: a bad one is
 * refused at once (exit 2, with the usage), before a second Node loads the dev loop.
 */
function devProcess(args: readonly string[]): Promise<number> | number {
  try {
    readDevArguments(args, process.env);
  } catch (err) {
    if (!(err instanceof DevArgumentError)) {
      throw err;
    }
    console.error(`dev: ${err.message}\n${DEV_USAGE}`);
    return EXIT_BAD_ARGUMENT;
  }
  return runChild(process.execPath, [libraryModule('dev/dev'), ...args]);
}

/** Refuses an unknown subcommand, naming the known ones. */
function unknownCommand(name: string): number {
  console.error(`run-once: no command "${name}"\n\n${OVERVIEW}`);
  return EXIT_BAD_ARGUMENT;
}

/**
 * `run-once` on `argv` (the arguments after the command's name): resolves to the exit status.
 *
 * @example process.exitCode = await main(['runs', '--check']);
 */
export async function main(argv: readonly string[]): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined) {
    console.error(OVERVIEW);
    return EXIT_BAD_ARGUMENT;
  }
  if (name === 'help' || name === '--help' || name === '-h') {
    console.log(OVERVIEW);
    return 0;
  }
  if (name === 'version' || name === '--version') {
    console.log(version());
    return 0;
  }
  if (name === 'check-node') {
    return 0; // bin/run-once.cjs checked the version before loading this module
  }
  if (name === 'deploy') {
    // deploy.sh has its own --help, with every environment variable and its default.
    return runChild('bash', [join(ROOT, 'deploy.sh'), ...args]);
  }
  const help = COMMAND_HELP[name];
  if (help === undefined) {
    return unknownCommand(name);
  }
  if (asksForHelp(args)) {
    console.log(help);
    return 0;
  }
  if (name === 'dev') {
    return devProcess(args);
  }
  return runInProcess(name, args);
}
