/**
 * The deployed entry (`build/main.cjs`): turns on Node's compile cache, then loads `index.ts`; as a
 * script (`gcp-build`) it fills the cache (docs/maintenance.md, "The deployed entry's compile cache").
 */
const nodeModule: typeof import('node:module') = require('node:module');

// An older Node would fail later with a stack trace (package.json engines).
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  console.error(`This function needs Node.js >= 22.18; this is Node.js ${process.versions.node}.`);
  process.exit(1);
}
// The platform's cache (NODE_COMPILE_CACHE) comes first; NODE_DISABLE_COMPILE_CACHE=1 still wins.
if (process.env.NODE_COMPILE_CACHE === undefined && nodeModule.getCompileCacheDir() === undefined) {
  // Inside `build/`, where `gcp-build` writes it, so the cache is part of the built app.
  nodeModule.enableCompileCache(`${__dirname}/.compile-cache`);
}

require('./index.js');

if (require.main === module) {
  // `node build/main.cjs` in gcp-build: no server, no Firestore call, so the process ends by itself.
  nodeModule.flushCompileCache();
  console.log(`compile cache written to ${nodeModule.getCompileCacheDir() ?? '(disabled)'}`);
}
