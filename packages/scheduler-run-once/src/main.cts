/**
 * The deployed entry, `scheduler-run-once/main` (a project's package.json `main`:
 * `node_modules/scheduler-run-once/dist/main.cjs`): turns on Node's module compile cache, then loads
 * the project's compiled entry, `build/index.js` under the directory the function runs in (Cloud
 * Run's and `npm start`'s: the project's root), or `RUN_ONCE_ENTRY` if set. As a script (the last
 * step of `gcp-build`) it fills the cache (docs/maintenance.md, "The deployed entry's compile cache").
 */
const nodeModule: typeof import('node:module') = require('node:module');
const nodePath: typeof import('node:path') = require('node:path');

/** The project's compiled entry, which registers its function (`registerScheduledJob`). */
const ENTRY = nodePath.resolve(process.env.RUN_ONCE_ENTRY ?? 'build/index.js');

// An older Node would fail later with a stack trace (package.json engines).
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  console.error(
    `This function needs Node.js >= 22.18; this is Node.js ${process.versions.node}.`,
  );
  process.exit(1);
}
// The platform's cache (NODE_COMPILE_CACHE) comes first; NODE_DISABLE_COMPILE_CACHE=1 still wins.
if (
  process.env.NODE_COMPILE_CACHE === undefined &&
  nodeModule.getCompileCacheDir() === undefined
) {
  // Beside the project's entry, where `gcp-build` writes it, so the cache is part of the built app.
  nodeModule.enableCompileCache(
    nodePath.join(nodePath.dirname(ENTRY), '.compile-cache'),
  );
}

require(ENTRY);

if (require.main === module) {
  // `node …/main.cjs` in gcp-build: no server, no Firestore call, so the process ends by itself.
  nodeModule.flushCompileCache();
  console.log(
    `compile cache written to ${nodeModule.getCompileCacheDir() ?? '(disabled)'}`,
  );
}
