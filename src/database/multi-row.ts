/** The SQL types a row source's columns take, and the JavaScript value each holds. */
interface ColumnValues {
  uuid: string;
  text: string;
  int: number;
  bigint: number;
  boolean: boolean;
  timestamptz: Date;
  jsonb: unknown;
  bytea: Buffer;
}

export type ColumnType = keyof ColumnValues;

/** A row source's columns: name → SQL type, in the order the source lists them. */
export type Columns = Record<string, ColumnType>;

/** One row of `C`: each column's value; null or absent is SQL NULL. */
export type RowOf<C extends Columns> = { [K in keyof C]?: ColumnValues[C[K]] | null };

/** In JSON, a lone surrogate is an escape PostgreSQL refuses (`\ud800`): the test is cheap, the fix rare. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/**
 * The parameters of one statement, numbered as they are added: parts of a statement built by
 * different repositories (a delivery's log entry, the runs it starts) compose into one statement
 * without either knowing the other's parameter numbers.
 */
export class StatementParams {
  readonly values: unknown[] = [];

  /** The placeholder of `value`, added as the next parameter. */
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }

  /**
   * Rows for a multi-row `INSERT … SELECT`: `json_to_recordset($n::json) AS alias(column type, …)`,
   * the rows as one JSON parameter. Its text is the same for any number of rows (one prepared
   * statement serves every batch), and one JSON text costs Node a third of what per-column arrays
   * cost (pg escapes every element of an array literal, and each jsonb element once more).
   */
  rows<C extends Columns>(alias: string, columns: C, rows: ReadonlyArray<RowOf<C>>): string {
    const names = Object.keys(columns);
    const objects = rows.map((row) => {
      const out: Record<string, unknown> = {};
      for (const name of names) {
        const value = row[name];
        // bytea's text input: `\x` and hex (JSON cannot hold bytes).
        out[name] = Buffer.isBuffer(value) ? `\\x${value.toString('hex')}` : value;
      }
      return out;
    });
    let json = JSON.stringify(objects);
    // As pg sends a string with a lone surrogate (UTF-8 with U+FFFD in its place), not as an error.
    if (SURROGATE_ESCAPE.test(json))
      json = JSON.stringify(objects, (_key, v: unknown) =>
        typeof v === 'string' ? Buffer.from(v).toString() : v,
      );
    const definition = names.map((name) => `${name} ${columns[name]}`).join(', ');
    return `json_to_recordset(${this.add(json)}::json) AS ${alias}(${definition})`;
  }
}
