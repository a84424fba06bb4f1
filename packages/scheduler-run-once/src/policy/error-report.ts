/**
 * The reports Error Reporting groups: a `missed run` and a `run failed after retries` log line
 * carry the `ReportedErrorEvent` type and a report location, as Error Reporting requires of an
 * entry without a stack trace ("Format a log entry to report error events",
 * https://cloud.google.com/error-reporting/docs/formatting-error-messages: a `jsonPayload` whose
 * `@type` is the value below is always evaluated as an error event; without a stack trace in
 * `message`, `context.reportLocation` is required). The `message` field stays the report's own
 * text: the deployed log-based metrics and alerts match it.
 */

/** The `@type` that makes a JSON log entry an Error Reporting event, with all required fields. */
export const REPORTED_ERROR_EVENT =
  'type.googleapis.com/google.devtools.clouderrorreporting.v1beta1.ReportedErrorEvent';

/** Which report a line is, and so where Error Reporting says it was decided. */
export type ReportKind = 'missed' | 'failed';

/** Where each report is decided: Error Reporting groups by it (and by the message). */
const REPORT_LOCATIONS: Readonly<
  Record<
    ReportKind,
    { readonly filePath: string; readonly functionName: string }
  >
> = {
  missed: {
    filePath: 'scheduler-run-once/policy/missed-runs.ts',
    functionName: 'MissedRunCheck.check',
  },
  failed: {
    filePath: 'scheduler-run-once/policy/final-failure.ts',
    functionName: 'finalFailureReporter',
  },
};

/** The command that acts on a report of `jobId`'s `slot` (an RFC 3339 instant). */
export function fixCommand(
  kind: ReportKind,
  jobId: string,
  slot: string,
): string {
  if (kind === 'missed') {
    return `npm run runs -- --job ${jobId} --since ${slot} --backfill`;
  }
  return `npm run trigger -- ${jobId} --slot ${slot} --rerun`;
}

/**
 * The fields that make a report's ERROR line an Error Reporting event: its `@type`, its
 * `context.reportLocation` (line 1: the location names the decision, not a source line), and
 * `fix`, the command that acts on it.
 *
 * @example errorEventFields('missed', 'nightly', '2026-10-16T02:00:00.000Z')
 */
export function errorEventFields(
  kind: ReportKind,
  jobId: string,
  slot: string,
): object {
  const location = REPORT_LOCATIONS[kind];
  return {
    '@type': REPORTED_ERROR_EVENT,
    context: { reportLocation: { ...location, lineNumber: 1 } },
    fix: fixCommand(kind, jobId, slot),
  };
}
