import type { QueryRunner } from 'typeorm';

/**
 * Defines the function `signature` again with its body as `change` makes it from the body it has
 * (the statements stay written once, in the migration that made them), in `language`.
 */
export async function redefineFunction(
  db: QueryRunner,
  signature: string,
  result: string,
  language: string,
  change: (body: string) => string,
): Promise<void> {
  const types = signature.replace(/\w+ (\w+)/g, '$1');
  const [{ prosrc }] = (await db.query(`SELECT prosrc FROM pg_proc WHERE oid = $1::regprocedure`, [
    types,
  ])) as [{ prosrc: string }];
  // The body as a literal (format's %L), whatever quotes or dollar signs it holds.
  const [{ ddl }] = (await db.query(
    `SELECT format('CREATE OR REPLACE FUNCTION %s RETURNS %s LANGUAGE %s AS %L', $1::text, $2::text, $3::text, $4::text) AS ddl`,
    [signature, result, language, change(prosrc)],
  )) as [{ ddl: string }];
  await db.query(ddl);
}
