/**
 * Cloud Scheduler's job id rule (the Job's `name`): "JOB_ID can contain only letters ([A-Za-z]),
 * numbers ([0-9]), hyphens (-), or underscores (_). The maximum length is 500 characters."
 */
const ID = '[A-Za-z0-9_-]{1,500}';
/** `JOB_ID`, or `projects/PROJECT_ID/locations/LOCATION_ID/jobs/JOB_ID` in Google's id forms. */
const JOB_NAME = new RegExp(
  `^(?:projects/[a-z0-9.:-]{1,100}/locations/[a-z0-9-]{1,64}/jobs/)?(${ID})$`,
);

/** The rule, for messages. */
export const JOB_ID_RULE = '1-500 letters, digits, "-" or "_"';

/** Whether `id` is a valid short job id. */
export function isJobId(id: unknown): id is string {
  return typeof id === 'string' && jobIdOf(id) === id;
}

/** The short job id a job name names (`ID` or `projects/…/jobs/ID`), else `undefined`. */
export function jobIdOf(jobName: string): string | undefined {
  return JOB_NAME.exec(jobName)?.[1];
}
