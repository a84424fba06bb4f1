/**
 * Readable log lines for `npm run dev`: the function still writes its production format (one JSON
 * object per line with Cloud Logging's fields, what the tests assert on); this turns each line into
 * `12:05:00.012 INFO: scheduled run: processed {"runId":…}` with pino-pretty, a development
 * dependency used only here. Lines that are not JSON pass through unchanged.
 */
import { prettyFactory } from 'pino-pretty';

/**
 * Fields of the production format that say nothing new on a developer's terminal: the process,
 * Error Reporting's service, Cloud Logging's own ids and trace links, the severity (pino-pretty
 * prints the level), the stack (printed with `err`) and the request summary (`status`,
 * `durationMs` and `outcome` are on the line already). Dots in a name are escaped: pino-pretty
 * reads unescaped dots as nesting.
 */
const NOISE = [
  'pid',
  'hostname',
  'serviceContext',
  'severity',
  'stack_trace',
  'httpRequest',
  'logging\\.googleapis\\.com/insertId',
  'logging\\.googleapis\\.com/trace',
  'logging\\.googleapis\\.com/spanId',
  'logging\\.googleapis\\.com/trace_sampled',
];

/** `HH:MM:SS.mmmZ` of Cloud Logging's `timestamp` (`{ seconds, nanos }`), or the value as text. */
function timeOf(timestamp: unknown): string {
  const { seconds, nanos } = (timestamp ?? {}) as { seconds?: unknown; nanos?: unknown };
  if (typeof seconds !== 'number') return String(timestamp);
  const ms = seconds * 1000 + (typeof nanos === 'number' ? nanos / 1e6 : 0);
  return `${new Date(ms).toISOString().slice(11, 23)}Z`;
}

/**
 * A function turning one line of the function's output into a readable line (with its newline).
 *
 * @param options.colorize - ANSI colours, for a terminal.
 * @example
 * const pretty = prettyLogLines({ colorize: process.stdout.isTTY });
 * process.stdout.write(pretty('{"level":30,"message":"job started","timestamp":{"seconds":1,"nanos":0}}'));
 * // 00:00:01.000Z INFO: job started
 */
export function prettyLogLines(options: { colorize: boolean }): (line: string) => string {
  const pretty = prettyFactory({
    colorize: options.colorize,
    messageKey: 'message',
    timestampKey: 'timestamp',
    ignore: NOISE.join(','),
    singleLine: true,
    customPrettifiers: { time: (timestamp) => timeOf(timestamp) },
  });
  return (line) => {
    if (!line.startsWith('{')) return `${line}\n`;
    return pretty(line);
  };
}
