/**
 * `@google-cloud/pino-logging-gcp-config` requires the whole `@google-cloud/logging` client when it
 * loads, yet uses it only to detect a project id when none is configured. Imported before it, this
 * module puts a stand-in for that client in the module cache; the first use of the stand-in loads
 * the real client and forwards to it. That saves about 40 ms of CPU per cold start
 * (docs/maintenance.md, "The logging client, loaded on first use").
 */
import Module, { createRequire } from 'node:module';

const fromConfig = createRequire(
  createRequire(import.meta.url).resolve('@google-cloud/pino-logging-gcp-config'),
);
const path = fromConfig.resolve('@google-cloud/logging');

if (fromConfig.cache[path] === undefined) {
  let client: object | undefined;
  const load = (): object => {
    if (client === undefined) {
      delete fromConfig.cache[path];
      client = fromConfig(path) as object;
    }
    return client;
  };
  const standIn = new Module(path);
  standIn.filename = path;
  standIn.loaded = true;
  // Own keys too, for ESM's named imports and spreads; configurable, as the target has none.
  const own = (key: string | symbol) => {
    const descriptor = Reflect.getOwnPropertyDescriptor(load(), key);
    return descriptor && { ...descriptor, configurable: true };
  };
  standIn.exports = new Proxy(
    {},
    {
      get: (_, key) => Reflect.get(load(), key),
      has: (_, key) => Reflect.has(load(), key),
      ownKeys: () => Reflect.ownKeys(load()),
      getOwnPropertyDescriptor: (_, key) => own(key),
    },
  );
  fromConfig.cache[path] = standIn;
}
