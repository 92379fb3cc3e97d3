import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/database/data-source.js';
import { Database } from '../src/database/database.js';
import { StatementParams } from '../src/database/multi-row.js';
import { createTestDatabase } from './support/database.js';

// Multi-row inserts go through one helper: what goes in as a row must come back as it was, whatever
// the text holds, and parts of one statement number their parameters without knowing each other.
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let dataSource: DataSource;
let db: Database;
beforeAll(async () => {
  database = await createTestDatabase();
  dataSource = await openDatabase(database.url, 2);
  db = Database.fromDataSource(dataSource);
  await db.execute(`CREATE TABLE rows_probe (
    id uuid PRIMARY KEY, label text, size bigint, at timestamptz, doc jsonb, content bytea, tag text)`);
  await db.execute(`CREATE TABLE tags_probe (tag text, n int)`);
});
afterAll(async () => {
  await dataSource?.destroy();
  await database?.drop();
});

const COLUMNS = {
  id: 'uuid',
  label: 'text',
  size: 'bigint',
  at: 'timestamptz',
  doc: 'jsonb',
  content: 'bytea',
} as const;

describe('StatementParams.rows', () => {
  it('inserts every row as given: quotes, backslashes, braces, unicode, nulls, nested JSON, bytes', async () => {
    const rows = [
      {
        id: '00000000-0000-4000-8000-000000000001',
        label: `he said "hi", {a,b} \\ 'x' \\x00 NULL ü 🚀`,
        size: 262_144,
        at: new Date('2026-11-24T22:00:00.123Z'),
        doc: { a: [1, null, 'x"y'], b: { c: '\\u0041' }, d: null },
        content: Buffer.from([0, 1, 0xff, 0x5c, 0x22]),
      },
      { id: '00000000-0000-4000-8000-000000000002', label: null, doc: null },
      {
        id: '00000000-0000-4000-8000-000000000003',
        label: 'NULL',
        doc: 'a string',
        content: Buffer.alloc(0),
      },
    ];
    const params = new StatementParams();
    const source = params.rows('r', COLUMNS, rows);
    await db.execute(
      `INSERT INTO rows_probe (id, label, size, at, doc, content) SELECT * FROM ${source}`,
      params.values,
    );
    const back = await db.query(`SELECT id, label, size, at, doc, content FROM rows_probe ORDER BY id`);
    expect(back).toEqual([
      { ...rows[0], size: '262144' },
      { id: rows[1]!.id, label: null, size: null, at: null, doc: null, content: null },
      { id: rows[2]!.id, label: 'NULL', size: null, at: null, doc: 'a string', content: Buffer.alloc(0) },
    ]);
  });

  it('stores a lone surrogate as pg stores a string parameter (U+FFFD), not as an error', async () => {
    const params = new StatementParams();
    const lone = `a\ud800b`;
    const source = params.rows('r', { id: 'uuid', label: 'text' }, [
      { id: '00000000-0000-4000-8000-000000000010', label: lone },
    ]);
    await db.execute(`INSERT INTO rows_probe (id, label) SELECT * FROM ${source}`, params.values);
    const [viaRows] = await db.query(`SELECT label FROM rows_probe WHERE id = $1`, [
      '00000000-0000-4000-8000-000000000010',
    ]);
    const [viaParam] = await db.query(`SELECT $1::text AS label`, [lone]);
    expect(viaRows!.label).toBe(viaParam!.label);
    expect(viaRows!.label).toBe('a\ufffdb');
  });

  it('numbers the parameters of several parts of one statement in the order they are added', async () => {
    const params = new StatementParams();
    const tag = params.add('batch-7');
    const probes = params.rows('p', { id: 'uuid' }, [
      { id: '00000000-0000-4000-8000-000000000020' },
      { id: '00000000-0000-4000-8000-000000000021' },
    ]);
    const counts = params.rows('c', { n: 'int' }, [{ n: 5 }]);
    expect([tag, probes.match(/\$\d+/)![0], counts.match(/\$\d+/)![0]]).toEqual(['$1', '$2', '$3']);
    const [row] = await db.query<{ inserted: number; n: number }>(
      `WITH probes AS (
         INSERT INTO rows_probe (id, tag) SELECT id, ${tag} FROM ${probes} RETURNING id
       ), tags AS (
         INSERT INTO tags_probe (tag, n) SELECT ${tag}, n FROM ${counts} RETURNING n
       ) SELECT (SELECT count(*)::int FROM probes) AS inserted, (SELECT n FROM tags) AS n`,
      params.values,
    );
    expect(row).toEqual({ inserted: 2, n: 5 });
  });

  it('has the same text for any number of rows (one prepared statement serves every batch)', () => {
    const one = new StatementParams().rows('r', COLUMNS, [{ id: '00000000-0000-4000-8000-000000000030' }]);
    const none = new StatementParams().rows('r', COLUMNS, []);
    expect(one).toBe(none);
    expect(one).toBe(
      'json_to_recordset($1::json) AS r(id uuid, label text, size bigint, at timestamptz, doc jsonb, content bytea)',
    );
  });
});
