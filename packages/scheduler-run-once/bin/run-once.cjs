#!/usr/bin/env node
/**
 * The `run-once` command (package.json `bin`). Plain CommonJS, so that any Node can run it: it
 * first stops, in one line, on a Node older than the package needs (`check-node.cjs`), then loads
 * the command, `src/cli/run-once.ts` in a checkout of the library (Node strips its types), or the
 * compiled `dist/cli/run-once.js` in the published package (Node strips no types under
 * node_modules, and the package ships dist/, not src/).
 */
'use strict';

require('./check-node.cjs');

const { existsSync } = require('node:fs');
const { join, sep } = require('node:path');
const { pathToFileURL } = require('node:url');

const source = join(__dirname, '..', 'src', 'cli', 'run-once.ts');
const compiled = join(__dirname, '..', 'dist', 'cli', 'run-once.js');
const underNodeModules = __dirname.split(sep).includes('node_modules');
const entry = existsSync(source) && !underNodeModules ? source : compiled;

/**
 * What to say, in one line, when the package itself cannot be loaded: its compiled `dist/` is
 * missing (a broken install, or a checkout not built) or one of its dependencies is. undefined
 * for any other error. A project's own missing import never gets here: the commands name it
 * (src/ops/declarations.ts).
 */
function brokenInstall(err) {
  if (
    err === null ||
    typeof err !== 'object' ||
    err.code !== 'ERR_MODULE_NOT_FOUND'
  ) {
    return undefined;
  }
  const packageDir = join(__dirname, '..');
  if (!existsSync(compiled) && entry === compiled) {
    return underNodeModules
      ? `run-once: this install of scheduler-run-once (${packageDir}) has no dist/: reinstall it (rm -rf node_modules, then npm install)`
      : `run-once: scheduler-run-once (${packageDir}) has no dist/: run npm run build there`;
  }
  const missing = /Cannot find (?:package|module) '([^']+)'/.exec(
    String(err.message),
  );
  const what = missing === null ? 'a module' : missing[1];
  return `run-once: scheduler-run-once cannot load ${what}, one of its own files or dependencies: run npm install in your project (rm -rf node_modules first if it persists)`;
}

import(pathToFileURL(entry).href)
  .then((command) => command.main(process.argv.slice(2)))
  .then(
    (status) => {
      process.exitCode = status;
    },
    (err) => {
      const broken = brokenInstall(err);
      // Anything else is a bug, not a failure a command names: its stack, and exit 1.
      console.error(broken ?? err);
      process.exitCode = 1;
    },
  );
