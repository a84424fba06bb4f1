/**
 * `@google-cloud/pino-logging-gcp-config` requires all of `@google-cloud/logging` at load, to detect
 * an unconfigured project id: imported before it, this caches a stand-in that loads the real client
 * on first use, own keys too (ESM's named imports), ~40 ms off a cold start (docs/maintenance.md).
 */
import Module, { createRequire } from 'node:module';

const gcpConfig = createRequire(import.meta.url).resolve(
  '@google-cloud/pino-logging-gcp-config',
);
const fromConfig = createRequire(gcpConfig);
const path = fromConfig.resolve('@google-cloud/logging');

if (fromConfig.cache[path] === undefined) {
  let client: object | undefined;
  const load = (): object => {
    if (client === undefined) {
      delete fromConfig.cache[path];
    }
    client ??= fromConfig(path) as object;
    return client;
  };
  const standIn = new Module(path);
  [standIn.filename, standIn.loaded] = [path, true];
  const own = (d?: PropertyDescriptor) => d && { ...d, configurable: true }; // target has none
  standIn.exports = new Proxy(
    {},
    {
      get: (_, key) => Reflect.get(load(), key),
      has: (_, key) => Reflect.has(load(), key),
      ownKeys: () => Reflect.ownKeys(load()),
      getOwnPropertyDescriptor: (_, key) =>
        own(Reflect.getOwnPropertyDescriptor(load(), key)),
    },
  );
  fromConfig.cache[path] = standIn;
}
