/**
 * Readable log lines for `npm run dev`: the function still writes its production format (one JSON
 * object per line with Cloud Logging's fields, what the tests assert on); this turns each line into
 * `12:05:00.012 INFO: scheduled run: processed {"runId":…}` with pino-pretty, a development
 * dependency used only here, with run, attempt and trigger ids cut to their first 8 characters
 * (`3f9a2c1e…`). Lines that are not JSON pass through unchanged.
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

/** Fields that hold a run id (64 hex) or an attempt or trigger id (a UUID), at any depth. */
const ID_FIELD = /^(run|attempt|rerun|trigger)_?id$|^heldBy$/i;
/** How much of an id a developer's line keeps: enough to tell runs apart and to grep the JSON. */
const ID_SHOWN = 8;

/**
 * `value` with every id field ({@link ID_FIELD}) longer than {@link ID_SHOWN} characters cut to
 * its first {@link ID_SHOWN} and `…`: a run id and an attempt id otherwise take 100 columns of
 * every line. Only the terminal's copy is cut; the function's JSON keeps the full ids.
 */
function shortenIds(value: unknown, key = ''): unknown {
  if (typeof value === 'string') {
    return ID_FIELD.test(key) && value.length > ID_SHOWN + 1
      ? `${value.slice(0, ID_SHOWN)}…`
      : value;
  }
  if (Array.isArray(value)) {
    return value.map((item) => shortenIds(item, key));
  }
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, shortenIds(v, k)]),
    );
  }
  return value;
}

/** `HH:MM:SS.mmmZ` of Cloud Logging's `timestamp` (`{ seconds, nanos }`), or the value as text. */
function timeOf(timestamp: unknown): string {
  const { seconds, nanos } = (timestamp ?? {}) as {
    seconds?: unknown;
    nanos?: unknown;
  };
  if (typeof seconds !== 'number') {
    return String(timestamp);
  }
  const ms = seconds * 1000 + (typeof nanos === 'number' ? nanos / 1e6 : 0);
  return `${new Date(ms).toISOString().slice(11, 23)}Z`;
}

/**
 * Whether to colour output for a terminal: `FORCE_COLOR` set (not `0`) says yes, `NO_COLOR` set
 * (not empty, https://no-color.org) says no, else whether the stream is a terminal.
 *
 * @example prettyLogLines({ colorize: colorWanted(process.stdout.isTTY === true, process.env) })
 */
export function colorWanted(
  isTerminal: boolean,
  env: NodeJS.ProcessEnv,
): boolean {
  const force = env.FORCE_COLOR;
  if (force !== undefined && force !== '' && force !== '0') {
    return true;
  }
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') {
    return false;
  }
  return isTerminal;
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
export function prettyLogLines(options: {
  colorize: boolean;
}): (line: string) => string {
  const pretty = prettyFactory({
    colorize: options.colorize,
    messageKey: 'message',
    timestampKey: 'timestamp',
    ignore: NOISE.join(','),
    singleLine: true,
    customPrettifiers: { time: (timestamp) => timeOf(timestamp) },
  });
  return (line) => {
    if (!line.startsWith('{')) {
      return `${line}\n`;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      return pretty(line);
    }
    return pretty(shortenIds(parsed) as Record<string, unknown>);
  };
}
