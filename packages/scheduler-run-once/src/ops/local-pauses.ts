/**
 * The pauses the local Scheduler honours (`npm run dev`, `npm run scheduler`): read from the job's
 * check document in the emulator, per job and the key scope its deliveries carry, as the function
 * reads them (`src/policy/pauses.ts`). One read per slot fired; nothing is cached, so a pause or a
 * resume takes effect at the next slot.
 */
import { Firestore } from '@google-cloud/firestore';
import { RunDocuments } from '../core/run-documents.ts';
import { loadConfig } from '../function/config.ts';
import { jobStateCollection } from '../policy/job-state.ts';
import { checkDocumentId } from '../policy/missed-run-cursor.ts';
import { pauseAt, readPauses } from '../policy/pauses.ts';
import type { LocalSchedulerOptions } from './local-scheduler.ts';
import { scopeOf } from './scope-args.ts';

/**
 * The `pauseOf` of a {@link LocalSchedulerOptions} that reads the emulator named by `env`
 * (`FIRESTORE_EMULATOR_HOST`, `GOOGLE_CLOUD_PROJECT`, `RUNS_COLLECTION`, the scope settings).
 *
 * @param delivery - the headers and query the Scheduler sends (the scope's values come from them).
 * @throws {ConfigError} if `env` is not a valid configuration.
 * @example new LocalScheduler({ url, jobs, pauseOf: emulatorPauses(env, deliveryOptions(settings)) })
 */
export function emulatorPauses(
  env: NodeJS.ProcessEnv,
  delivery: Pick<LocalSchedulerOptions, 'headers' | 'query'>,
): NonNullable<LocalSchedulerOptions['pauseOf']> {
  const config = loadConfig(env);
  const headers = Object.fromEntries(
    Object.entries(delivery.headers ?? {}).map(([name, value]) => [
      name.toLowerCase(),
      value,
    ]),
  );
  const params = Object.fromEntries(new URLSearchParams(delivery.query ?? ''));
  const scope = scopeOf(config, { headers, params });
  const documents = new RunDocuments(
    new Firestore({
      projectId: config.projectId ?? 'demo-scheduler-run-once',
      databaseId: config.firestoreDatabase,
      // The emulator `env` names, not this process's environment: `npm run dev` starts one and
      // sets it only for its children (without it the client would look for Google credentials).
      ...(env.FIRESTORE_EMULATOR_HOST
        ? { host: env.FIRESTORE_EMULATOR_HOST, ssl: false }
        : {}),
    }),
    {
      collection: jobStateCollection(config.runsCollection),
      retentionMs: config.retentionMs,
      timeoutMs: config.firestoreTimeoutMs,
    },
  );
  return async (jobId, slot) => {
    const read = await documents.readData(checkDocumentId(jobId, scope));
    const pauses = readPauses(read.data, read.readTime);
    // Pauses this version never wrote pause nothing: the slot fires (and the function says why).
    if (pauses === 'unreadable') {
      return undefined;
    }
    return pauseAt(pauses, slot)?.note;
  };
}
