/** How every command prints: one JSON document with --json, a readable table otherwise. */
export interface OutputOptions {
  json?: boolean;
}

export function print(opts: OutputOptions, data: unknown, table?: () => string): void {
  process.stdout.write(opts.json || !table ? `${JSON.stringify(data, null, 2)}\n` : `${table()}\n`);
}

/** A plain aligned table: a header row, then one row per item. */
export function renderTable(
  headers: string[],
  rows: Array<Array<string | number | null | undefined>>,
): string {
  const cells = [
    headers,
    ...rows.map((r) => r.map((c) => (c === null || c === undefined ? '-' : String(c)))),
  ];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => r[i].length)));
  return cells
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i]))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
