/**
 * Example job: the guide's "idempotent proxy" in front of a Cloud Build trigger. Each scheduled run
 * runs the trigger once (`projects.locations.triggers.run`), passing the run id, the schedule time
 * and the job name as user-defined substitutions (`_RUN_ID`, `_SCHEDULE_TIME`, `_JOB_NAME`), which
 * the build config reads as `$_RUN_ID`, e.g. as the idempotency key of what the build changes.
 *
 * `triggers.run` takes no request id and starts a new build on every call. The ledger in front of
 * it makes one run start one build, and the look before the launch (`../shared/launch-once.ts`)
 * adopts a build that an earlier attempt of the run started and then died.
 *
 * To use it: copy this file and `../shared/launch-once.ts` into src/ (fix the imports as README.md's "Use it" lists them), move
 * `@google-cloud/cloudbuild` from devDependencies to dependencies, and declare the job in
 * src/jobs.ts:
 *
 *   defineJob({
 *     id: 'nightly-build',
 *     schedule: '0 4 * * *',
 *     run: createCloudBuildJob({ trigger: 'projects/PROJECT/locations/REGION/triggers/TRIGGER_ID' }),
 *   })
 *
 * For a global trigger, add `buildLocation` (`'global'` for the default pool, else its private
 * pool's region). The function's runtime service account needs `roles/cloudbuild.builds.editor`
 * (`cloudbuild.builds.create` runs a trigger, `cloudbuild.builds.list` lists builds,
 * `cloudbuild.builds.get` reads the trigger); see README.md.
 */
import { CloudBuildClient, type protos } from '@google-cloud/cloudbuild';
import type { JobContext } from '../../src/core/job-context.ts';
import {
  findSince,
  launchOnce,
  lookSince,
  NEXT_PAGE_ON_DEMAND,
  nameOf,
  type RecordLaunch,
  timestampToDate,
} from '../shared/launch-once.ts';

/** The substitution holding the run id. User-defined substitutions start with `_`. */
export const RUN_ID_SUBSTITUTION = '_RUN_ID';
/** The substitution holding the schedule time, RFC 3339 UTC. */
export const SCHEDULE_TIME_SUBSTITUTION = '_SCHEDULE_TIME';
/** The substitution holding the Scheduler job id. */
export const JOB_NAME_SUBSTITUTION = '_JOB_NAME';

/**
 * The page size the look asks for (ListBuildsRequest.page_size, "Number of results to return in
 * the list"); the look follows `next_page_token` to the end of its window whatever the service
 * answers per page.
 */
export const LIST_PAGE_SIZE = 50;

const TRIGGER_NAME =
  /^projects\/([^/]+)\/locations\/([^/]+)\/triggers\/([^/]+)$/;

/** Options of {@link createCloudBuildJob}. */
export interface CloudBuildJobOptions {
  /**
   * The trigger, by its id: `projects/PROJECT/locations/REGION/triggers/TRIGGER_ID` (`global` for
   * a global trigger). The id, not the trigger's name: `RunBuildTriggerRequest.trigger_id`.
   */
  readonly trigger: string;
  /**
   * The region the trigger's builds run in, where the look lists them: the trigger's own region
   * unless given. Required for a global trigger: `global` for the default pool, else its private
   * pool's region ({@link buildLocationOf}).
   */
  readonly buildLocation?: string;
  /** The branch to build (`RepoSource.branch_name`), for triggers that need one; optional. */
  readonly branch?: string;
  /** The Cloud Build client; tests give one pointed at a local fake. */
  readonly client?: CloudBuildClient;
  /** Writes the build's name into the run's record before the run completes; optional. */
  readonly recordLaunch?: RecordLaunch;
}

/** A trigger's resource name taken apart. */
export interface TriggerRef {
  readonly project: string;
  readonly location: string;
  readonly triggerId: string;
}

/**
 * Takes a trigger's resource name apart.
 *
 * @throws Error if `trigger` is not `projects/PROJECT/locations/LOCATION/triggers/TRIGGER_ID`.
 * @example parseTrigger('projects/p/locations/us-central1/triggers/5f1e…') // { project: 'p', location: 'us-central1', triggerId: '5f1e…' }
 */
export function parseTrigger(trigger: string): TriggerRef {
  const m = TRIGGER_NAME.exec(trigger);
  if (m === null) {
    throw new Error(
      `trigger ${JSON.stringify(trigger)} must be projects/PROJECT/locations/REGION/triggers/TRIGGER_ID`,
    );
  }
  return {
    project: m[1] as string,
    location: m[2] as string,
    triggerId: m[3] as string,
  };
}

/** The region a trigger's builds are listed in: {@link buildLocationOf}'s answer. */
const LOCATION_ID = /^[a-z][a-z0-9-]{0,62}$/;

/**
 * The region the builds of trigger `ref` run in, where the look must list them. A regional
 * trigger's builds run in its region ("If you specify a private pool in the build config file
 * associated with your trigger, the region you select for your trigger must match the region of
 * your private pool"); a global trigger's run where its build config says ("If you select global
 * as the region for your build trigger, Cloud Build uses the region specified in the build config
 * file associated with your trigger": a private pool's region, or global for the default pool),
 * both from https://cloud.google.com/build/docs/locations. This proxy cannot read a build config
 * kept in the repository, so for a global trigger it must be told.
 *
 * @param buildLocation - `CloudBuildJobOptions.buildLocation`.
 * @throws Error at once, naming the setting, for a global trigger without `buildLocation`, a
 *   regional one with another region, or a value that is not a region id.
 * @example buildLocationOf(parseTrigger('projects/p/locations/global/triggers/t'), 'europe-west1') // 'europe-west1'
 */
export function buildLocationOf(
  ref: TriggerRef,
  buildLocation: string | undefined,
): string {
  if (buildLocation !== undefined && !LOCATION_ID.test(buildLocation)) {
    throw new Error(
      `buildLocation ${JSON.stringify(buildLocation)} is not a region id such as europe-west1 or global`,
    );
  }
  if (ref.location === 'global') {
    if (buildLocation !== undefined) {
      return buildLocation;
    }
    throw new Error(
      `trigger ${ref.triggerId} is global: Cloud Build runs its builds in the region its build config names (a private pool's region), or global for the default pool, and lists each build only there. ` +
        "Set buildLocation: 'global' for the default pool, or the private pool's region, so the look finds this run's build.",
    );
  }
  if (buildLocation !== undefined && buildLocation !== ref.location) {
    throw new Error(
      `buildLocation ${buildLocation} differs from the trigger's region ${ref.location}: a regional trigger's builds run in its region (a private pool it names must be there); leave buildLocation out.`,
    );
  }
  return ref.location;
}

/** The substitutions this proxy passes: a trigger declaring one may override the run's value. */
export const RUN_SUBSTITUTIONS = [
  RUN_ID_SUBSTITUTION,
  SCHEDULE_TIME_SUBSTITUTION,
  JOB_NAME_SUBSTITUTION,
] as const;

/**
 * Why the trigger cannot carry the run id to its builds, or `undefined`: a trigger that declares
 * one of {@link RUN_SUBSTITUTIONS} itself. The reference promises only that RepoSource
 * substitutions are "Substitutions to use in a triggered build", never that a value passed to
 * `RunBuildTrigger` wins over the trigger's own, and googleapis/nodejs-cloudbuild#117 reports the
 * trigger's defaults winning; then the build's `_RUN_ID` is not this run's, the look can never find
 * it, and every retry would start another.
 *
 * @example triggerProblem({ substitutions: { _RUN_ID: '' } }, 't') // 'trigger t declares _RUN_ID …'
 */
export function triggerProblem(
  trigger: protos.google.devtools.cloudbuild.v1.IBuildTrigger,
  name: string,
): string | undefined {
  const declared = RUN_SUBSTITUTIONS.filter(
    (key) => key in (trigger.substitutions ?? {}),
  );
  if (declared.length === 0) {
    return undefined;
  }
  return (
    `trigger ${name} declares ${declared.join(', ')} among its own substitutions: a value triggers.run passes for ${declared.length === 1 ? 'it' : 'them'} may be ignored in favour of the trigger's (googleapis/nodejs-cloudbuild#117), ` +
    "and then no retry could find this run's build; remove them from the trigger's substitutions (the build config reads what triggers.run passes). Not launching."
  );
}

/**
 * The substitutions of one run's build. They override the trigger's own values for this build
 * only ("Substitutions to use in a triggered build. Should only be used with RunBuildTrigger",
 * RepoSource.substitutions, google/devtools/cloudbuild/v1/cloudbuild.proto).
 *
 * @example runSubstitutions(ctx) // { _RUN_ID: '0f3a…', _SCHEDULE_TIME: '2026-10-16T12:00:00.000Z', _JOB_NAME: 'nightly-build' }
 */
export function runSubstitutions(
  ctx: Pick<JobContext, 'runId' | 'scheduleTime' | 'jobName'>,
): Record<string, string> {
  return {
    [RUN_ID_SUBSTITUTION]: ctx.runId,
    [SCHEDULE_TIME_SUBSTITUTION]: ctx.scheduleTime.toISOString(),
    [JOB_NAME_SUBSTITUTION]: ctx.jobName,
  };
}

/**
 * The build's resource name: `name`, or `projects/P/locations/L/builds/ID` from its id.
 *
 * @example buildName({ id: 'b1' }, ref) // 'projects/p/locations/us-central1/builds/b1'
 */
export function buildName(
  build: protos.google.devtools.cloudbuild.v1.IBuild,
  ref: TriggerRef,
  location = ref.location,
) {
  if (typeof build.name === 'string' && build.name !== '') {
    return build.name;
  }
  return nameOf(
    build.id
      ? `projects/${ref.project}/locations/${location}/builds/${build.id}`
      : undefined,
    'build',
  );
}

/**
 * Creates a job that runs `options.trigger` once per scheduled run.
 *
 * The look: `builds.list` of the builds' location ({@link buildLocationOf}), newest first
 * ("Builds will be sorted by `create_time`, descending", ListBuildsResponse,
 * google/devtools/cloudbuild/v1/cloudbuild.proto), page after page up to the look's bounds
 * (`findSince`: a count, and a day before the run's first claim by `Build.create_time`, "Time at
 * which the request to create the build was received"); a build of
 * this run is the one whose `substitutions._RUN_ID` is this run id (Build.substitutions, returned
 * with every build). No filter: ListBuildsRequest documents `filter` only as "the raw filter
 * text", and `Build.build_trigger_id` is promised only "if it was triggered automatically", so a
 * `trigger_id="…"` filter might leave out the very build `RunBuildTrigger` started. Not a tag
 * either: `triggers.run` sets none, and Cloud Build documents substitutions in `steps` and
 * `images`, not in `tags`.
 *
 * Before its first look an instance reads the trigger (`triggers.get`) and refuses one that
 * declares the run's substitutions itself ({@link triggerProblem}); after a launch, a build whose
 * `_RUN_ID` is not this run's means the trigger drops what it is passed: the run completes (the
 * build started), and every later run of the instance refuses before launching.
 *
 * The launch: `triggers.run` with the substitutions. It answers a long-running operation whose
 * metadata holds the new Build; the operation completes only when the build does, so the job
 * records the build's name from the metadata and does not wait.
 *
 * Both requests name the trigger's location (`name`, `parent`) and leave `projectId` out. The
 * reference: "To run a regional or global trigger, use the POST request that includes the
 * location endpoint in the path … The POST request that does not include the location endpoint
 * in the path can only be used when running global triggers"
 * (https://cloud.google.com/build/docs/api/reference/rest/v1/projects.triggers/run), and builds
 * of a region are listed under `projects/P/locations/L`. gRPC (the default transport) routes on
 * the location in `name`/`parent` (the methods' `google.api.routing`); the REST transport
 * (`fallback`) takes the first HTTP binding whose path fields are all set (google-gax
 * `transcode`), which with `projectId` set would be the project-only path. `project_id` is marked
 * Required in both requests; the project is in `name`/`parent`, but that the service accepts the
 * requests without it is unverified without a real project (see README.md).
 *
 * @param options - the trigger, and optionally the branch, client and recorder.
 * @returns the job's `run`, for `defineJob({ id, schedule, run })`.
 * @throws Error at once if `options.trigger` is not a trigger's resource name, or
 *   `buildLocation` is missing for a global trigger or wrong ({@link buildLocationOf}); (from the
 *   job) when Cloud Build refuses or fails, the trigger is refused, the look is incomplete
 *   (`LookIncompleteError`), or the recorder throws: the claim is released and Scheduler
 *   retries, and the retry adopts a build that started.
 * @example
 * defineJob({ id: 'nightly-build', schedule: '0 4 * * *', run: createCloudBuildJob({ trigger }) });
 */
export function createCloudBuildJob(
  options: CloudBuildJobOptions,
): (ctx: JobContext) => Promise<void> {
  const ref = parseTrigger(options.trigger);
  const location = buildLocationOf(ref, options.buildLocation);
  const client = options.client ?? new CloudBuildClient();
  /** The trigger's check, once per instance while it passes (`triggerProblem`). */
  let checked: Promise<void> | undefined;
  const checkTrigger = async () => {
    const [trigger] = await client.getBuildTrigger({ name: options.trigger });
    const problem = triggerProblem(trigger, options.trigger);
    if (problem !== undefined) {
      throw new Error(problem);
    }
  };
  /** Set once a build came back without this run's `_RUN_ID`: the trigger drops what we pass. */
  let dropped: string | undefined;
  return async (ctx) => {
    await launchOnce(
      ctx,
      {
        target: 'cloud-build',
        find: async () => {
          if (dropped !== undefined) {
            throw new Error(dropped);
          }
          checked ??= checkTrigger().catch((err: unknown) => {
            checked = undefined;
            throw err;
          });
          await checked;
          const build = await findSince(
            client.listBuildsAsync(
              {
                parent: `projects/${ref.project}/locations/${location}`,
                pageSize: LIST_PAGE_SIZE,
              },
              NEXT_PAGE_ON_DEMAND,
            ),
            lookSince(ctx),
            {
              time: (b) => timestampToDate(b.createTime),
              matches: (b) =>
                b.substitutions?.[RUN_ID_SUBSTITUTION] === ctx.runId,
            },
          );
          return build === undefined
            ? undefined
            : buildName(build, ref, location);
        },
        launch: async () => {
          const [operation] = await client.runBuildTrigger({
            name: options.trigger,
            triggerId: ref.triggerId,
            source: {
              substitutions: runSubstitutions(ctx),
              ...(options.branch === undefined
                ? {}
                : { branchName: options.branch }),
            },
          });
          // The operation's metadata is a BuildOperationMetadata (google-gax types it as gRPC metadata).
          const metadata =
            operation.metadata as protos.google.devtools.cloudbuild.v1.IBuildOperationMetadata | null;
          const build = metadata?.build ?? {};
          const carried = build.substitutions?.[RUN_ID_SUBSTITUTION];
          if (build.substitutions != null && carried !== ctx.runId) {
            // The build started: failing now would release the claim and start another. It is
            // recorded as this run's; every later run of this instance refuses before launching.
            dropped = `trigger ${options.trigger} started a build whose ${RUN_ID_SUBSTITUTION} is ${JSON.stringify(carried ?? null)}, not the run id passed to triggers.run: it drops or overrides the substitutions (googleapis/nodejs-cloudbuild#117), so the look cannot find a run's build and a retry would start another. Not launching until the trigger is fixed and the function restarted.`;
            ctx.logger.error(
              { trigger: options.trigger, build: build.name },
              dropped,
            );
          }
          return buildName(build, ref, location);
        },
      },
      options.recordLaunch,
    );
  };
}
