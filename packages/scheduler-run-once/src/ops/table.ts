/**
 * Plain-text tables for the operations commands: columns padded to their widest cell, two spaces
 * apart, no trailing spaces.
 */

/**
 * Formats `rows` (the first is the header) as aligned columns.
 *
 * @example formatTable([['JOB', 'STATE'], ['nightly', 'completed']])
 */
export function formatTable(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]?.map((_, c) => Math.max(...rows.map((row) => row[c]?.length ?? 0))) ?? [];
  return rows
    .map((row) =>
      row
        .map((cell, c) => cell.padEnd(widths[c] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
