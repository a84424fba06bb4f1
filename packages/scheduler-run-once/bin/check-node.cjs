/**
 * Stops an npm script at once, in one line, when Node is older than package.json `engines.node`
 * (the first Node that runs the `.ts` scripts and tests without a flag, 22.18). Every script the
 * README names starts with it; `npm install` is stopped by `engine-strict=true` in `.npmrc`, with
 * npm's own six-line EBADENGINE error: npm checks `engines` before any script could run, and
 * without engine-strict it only warns and installs.
 *
 * CommonJS and plain JavaScript on purpose: an old Node must be able to run this file to say so.
 * Exit status 1 and one line on stderr when too old; nothing and 0 otherwise.
 */
'use strict';

const { readFileSync } = require('node:fs');
const { join } = require('node:path');

/** `[major, minor, patch]` of a version such as `22.18.0` or `v20.20.2`. */
function parts(version) {
  return String(version)
    .replace(/^v/, '')
    .split('.')
    .map((part) => Number.parseInt(part, 10) || 0)
    .concat([0, 0, 0])
    .slice(0, 3);
}

function atLeast(version, minimum) {
  const have = parts(version);
  const need = parts(minimum);
  for (let i = 0; i < 3; i++) {
    if (have[i] !== need[i]) {
      return have[i] > need[i];
    }
  }
  return true;
}

const packageJson = JSON.parse(
  readFileSync(join(__dirname, '..', 'package.json'), 'utf8'),
);
const range = packageJson.engines?.node ?? '>=22.18';
const minimum = range.replace(/^>=\s*/, '');

if (!atLeast(process.versions.node, minimum)) {
  console.error(
    `${packageJson.name} needs Node.js >= ${minimum}; found Node.js ${process.version} ` +
      `(${process.execPath}). Install Node 24 (the project's target) and run again.`,
  );
  process.exit(1);
}
