import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SchemaRegistry } from '../src/common/schema-validator.js';
import { fromRoot } from '../src/common/paths.js';
import { bundleSchema, DEFINITION_SCHEMAS } from '../src/factories/definition-schemas.js';

/**
 * `schemas/editor/` holds each definition schema bundled with what it references, so that an editor
 * resolves a file's `# yaml-language-server: $schema=<relative path>` offline. They are what the
 * service serves at /api/v1/factory-files/schemas/{name}.schema.json; this test keeps them so.
 * After a schema change: UPDATE_EDITOR_SCHEMAS=1 npx vitest run test/editor-schemas.test.ts
 */
describe('the editor schemas in schemas/editor/', () => {
  const registry = new SchemaRegistry();
  it.each(DEFINITION_SCHEMAS.map((s) => [s.name, s.id]))('%s.schema.json is the bundled %s', (name, id) => {
    const path = fromRoot('schemas', 'editor', `${name}.schema.json`);
    const expected = `${JSON.stringify(bundleSchema(registry, id), null, 2)}\n`;
    if (process.env.UPDATE_EDITOR_SCHEMAS) writeFileSync(path, expected);
    expect(readFileSync(path, 'utf8'), `${path} is stale: see this test's comment`).toBe(expected);
  });

  it('is where the example factory’s files point their editors', () => {
    expect(readFileSync(fromRoot('examples', 'factory', 'factory.yaml'), 'utf8')).toMatch(
      /^# yaml-language-server: \$schema=\.\.\/\.\.\/schemas\/editor\/factory\.schema\.json\n/,
    );
    expect(readFileSync(fromRoot('examples', 'factory', 'webhooks', 'github.yaml'), 'utf8')).toMatch(
      /^# yaml-language-server: \$schema=\.\.\/\.\.\/\.\.\/schemas\/editor\/webhook\.schema\.json\n/,
    );
  });
});
