/**
 * Cloud Scheduler's job id rule, in one place: declarations are checked against it, and a
 * delivery's `X-CloudScheduler-JobName` is read with it.
 *
 * Source: the Job resource's `name`, "projects/PROJECT_ID/locations/LOCATION_ID/jobs/JOB_ID …
 * JOB_ID can contain only letters ([A-Za-z]), numbers ([0-9]), hyphens (-), or underscores (_).
 * The maximum length is 500 characters." Scheduler sends the short JOB_ID in the header (the
 * Scheduler guide, "deduplicate job requests"); the full name is accepted too.
 */

const ID = '[A-Za-z0-9_-]{1,500}';
const JOB_ID = new RegExp(`^${ID}$`);
/** `projects/PROJECT_ID/locations/LOCATION_ID/jobs/JOB_ID`, with Google's project and region forms. */
const FULL_JOB_NAME = new RegExp(
  `^projects/[a-z0-9.:-]{1,100}/locations/[a-z0-9-]{1,64}/jobs/(${ID})$`,
);

/** The rule, for messages. */
export const JOB_ID_RULE = '1-500 letters, digits, "-" or "_"';

/** Whether `id` is a valid short job id. */
export function isJobId(id: unknown): id is string {
  return typeof id === 'string' && JOB_ID.test(id);
}

/**
 * The short job id a job name names: `ID` itself, or the last segment of
 * `projects/PROJECT_ID/locations/LOCATION_ID/jobs/ID`; `undefined` for anything else. Both forms
 * name one Scheduler job, so run ids computed from this are the same whichever form was sent.
 *
 * @example jobIdOf('projects/p/locations/us-central1/jobs/nightly') // 'nightly'
 */
export function jobIdOf(jobName: string): string | undefined {
  if (JOB_ID.test(jobName)) return jobName;
  return FULL_JOB_NAME.exec(jobName)?.[1];
}
