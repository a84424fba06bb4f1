/**
 * Plain-text tables for the operations commands: columns padded to their widest cell, two spaces
 * apart, no trailing spaces. Every cell is made printable first: a table shows stored text (a
 * record's last error, a pause's note, an undeclared job's id), which may hold a newline or a
 * terminal's escape sequence.
 */

/** C0 and C1 control characters (newline, carriage return, escape, …) and DEL. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters it replaces.
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f]/g;

/** The visible form of a control character: `\n`, `\r`, `\t`, else `\u001b` and the like. */
function escaped(character: string): string {
  if (character === '\n') {
    return '\\n';
  }
  if (character === '\r') {
    return '\\r';
  }
  if (character === '\t') {
    return '\\t';
  }
  const code = character.charCodeAt(0).toString(16).padStart(4, '0');
  return `\\u${code}`;
}

/**
 * `text` with every control character shown as its escape, so stored text cannot break a table's
 * lines or drive the terminal (colours, cursor moves, a cleared screen).
 *
 * @example printable('boom\n\u001b[2J') // 'boom\\n\\u001b[2J'
 */
export function printable(text: string): string {
  return text.replace(CONTROL_CHARACTERS, escaped);
}

/**
 * Formats `rows` (the first is the header) as aligned columns, each cell {@link printable}.
 *
 * @example formatTable([['JOB', 'STATE'], ['nightly', 'completed']])
 */
export function formatTable(rows: readonly (readonly string[])[]): string {
  const cells = rows.map((row) => row.map(printable));
  const widths =
    cells[0]?.map((_, c) =>
      Math.max(...cells.map((row) => row[c]?.length ?? 0)),
    ) ?? [];
  return cells
    .map((row) =>
      row
        .map((cell, c) => cell.padEnd(widths[c] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
