import type { SchemaRegistry } from '../common/schema-validator.js';

/** The definition files and their schemas, as editors and CI fetch them. */
export const DEFINITION_SCHEMAS = [
  { file: 'factory.yaml', id: 'FactoryFile', name: 'factory' },
  { file: 'agents/<name>/agent.md (front matter)', id: 'AgentFrontMatter', name: 'agent' },
  {
    file: 'automations/<name>/automation.md (front matter)',
    id: 'AutomationFrontMatter',
    name: 'automation',
  },
  { file: 'webhooks/<name>.yaml', id: 'WebhookFile', name: 'webhook' },
  { file: 'notifications/<name>.yaml', id: 'NotificationFile', name: 'notification' },
  { file: 'environments/<name>.yaml', id: 'EnvironmentFile', name: 'environment' },
] as const;

/**
 * One schema with every schema it references inlined under `$defs`, so an editor can use its URL
 * alone (`# yaml-language-server: $schema=…`).
 */
export function bundleSchema(registry: SchemaRegistry, id: string): Record<string, unknown> {
  const defs: Record<string, unknown> = {};
  const rewrite = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(rewrite);
    if (!node || typeof node !== 'object') return node;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string' && !v.startsWith('#')) {
        if (!(v in defs)) {
          defs[v] = {};
          const { $schema: _s, $id: _i, ...rest } = registry.schemas[v] ?? {};
          defs[v] = rewrite(rest);
        }
        out[k] = `#/$defs/${v}`;
      } else out[k] = rewrite(v);
    }
    return out;
  };
  const root = rewrite(registry.schemas[id]) as Record<string, unknown>;
  return { ...root, $defs: { ...(root.$defs as object | undefined), ...defs } };
}

/** The one version of the definition files there is: factory.yaml's `schemaVersion`, as its schema fixes it. */
export function schemaVersion(registry: SchemaRegistry): string {
  const factory = registry.schemas.FactoryFile as { properties: { schemaVersion: { const: string } } };
  return factory.properties.schemaVersion.const;
}

/** Every definition schema of the version, bundled, by file name (the clients' schema bundle). */
export function schemaDocuments(registry: SchemaRegistry): Record<string, Record<string, unknown>> {
  return Object.fromEntries(
    DEFINITION_SCHEMAS.map((s) => [`${s.name}.schema.json`, bundleSchema(registry, s.id)]),
  );
}
