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

import(pathToFileURL(entry).href)
  .then((command) => command.main(process.argv.slice(2)))
  .then(
    (status) => {
      process.exitCode = status;
    },
    (err) => {
      // A bug, not a failure a command names: its stack, and exit 1.
      console.error(err);
      process.exitCode = 1;
    },
  );
