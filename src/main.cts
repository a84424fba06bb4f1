/**
 * The deployed entry (package.json `main`, built to `build/main.cjs`): turns on Node's module
 * compile cache, then loads `index.ts`, which registers the function. Run as a script
 * (`node build/main.cjs`, the last step of `gcp-build`), it fills that cache and exits.
 *
 * Why: much of a cold start is compiling the client libraries (Firestore, google-gax, gRPC). With
 * the cache, V8 reads their compiled code from disk instead (about a fifth off spawn → first 200 in
 * the bench; docs/performance.md, Cold start). The cache only serves modules loaded after it is
 * enabled, so this entry stays tiny and loads everything else afterwards.
 *
 * Why the cache reaches the image although `.gcloudignore` leaves `build/` out of the upload:
 * `gcp-build` runs on Cloud Build after the upload, in the app directory that becomes the image
 * (GoogleCloudPlatform/buildpacks, cmd/nodejs/npm/lib/lib.go runs `npm run gcp-build`). Entries are
 * keyed by the module's absolute path and checked against its content; the app directory is the
 * same when building and when serving (`/workspace`), which the buildpack's own cache assumes too.
 * A stale or foreign entry is recompiled, never used. Node names the cache's subdirectory after its
 * version and V8 flags; the `--max-old-space-size` the buildpack adds at launch leaves that name
 * unchanged (checked on Node 24.21), and a flag that changed it would cost the speed-up, not
 * correctness.
 *
 * CommonJS, not ESM: `require` loads `index.js` synchronously, so the function is registered when
 * functions-framework looks for it, without top-level await; and the buildpack's own cache
 * generator `require`s the entry (cmd/nodejs/functions_framework/bytecode_cache/main.js), which a
 * module with top-level await would fail.
 */
const nodeModule: typeof import('node:module') = require('node:module');
const { join }: typeof import('node:path') = require('node:path');

/** Where `gcp-build` writes the cache: inside `build/`, so it is part of the built app. */
const CACHE_DIR = join(__dirname, '.compile-cache');

// The platform comes first. Google's Node.js functions buildpack can build its own cache into the
// image and set NODE_COMPILE_CACHE at launch (behind a cold-start study flag today:
// cmd/nodejs/functions_framework/lib/lib.go, setupCacheLayer). Node then enables that cache before
// any module loads, so it also serves functions-framework itself, which ours cannot. The variable
// is Node's, not this function's configuration, hence read here and not in config.ts.
// NODE_DISABLE_COMPILE_CACHE=1 still wins: Node then refuses enableCompileCache.
// `npm start` on an older Node would fail later with a stack trace (`require` of the ES modules):
// say so in one line instead (package.json engines; the npm scripts check with scripts/check-node.cjs).
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  console.error(`This function needs Node.js >= 22.18; this is Node.js ${process.versions.node}.`);
  process.exit(1);
}
if (process.env.NODE_COMPILE_CACHE === undefined && nodeModule.getCompileCacheDir() === undefined) {
  nodeModule.enableCompileCache(CACHE_DIR);
}

require('./index.js');

if (require.main === module) {
  // `node build/main.cjs` in gcp-build: index.js registered the function with functions-framework,
  // which starts no server (its CLI does), and made a Firestore client, which opens no channel
  // before its first call; so this needs no Firestore and the process ends by itself.
  nodeModule.flushCompileCache();
  console.log(`compile cache written to ${nodeModule.getCompileCacheDir() ?? '(disabled)'}`);
}
