import type { SchemaRegistry } from '../common/schema-validator.js';
import type { DefinitionError } from './definition.js';
import { SourceFile } from './source-file.js';

/** What a repository path is in a factory definition. */
export type FileKind =
  'factory' | 'agent' | 'automation' | 'webhook' | 'skill' | 'notification' | 'environment';

export const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Why `name` cannot name an agent, automation, webhook or skill file; undefined when it can. */
export function nameProblem(name: string): string | undefined {
  return NAME.test(name)
    ? undefined
    : `"${name}" is not a valid name: use letters, digits, ".", "_", "-" (at most 64, starting with a letter or digit)`;
}

const SCHEMA_OF: Partial<Record<FileKind, string>> = {
  factory: 'FactoryFile',
  agent: 'AgentFrontMatter',
  automation: 'AutomationFrontMatter',
  webhook: 'WebhookFile',
  notification: 'NotificationFile',
  environment: 'EnvironmentFile',
};

/** A definition file parsed and checked against its JSON Schema: the same for the same content. */
export interface DefinitionFile {
  kind: FileKind;
  name: string;
  source: SourceFile;
  /** Parse, naming and schema errors of this file alone. */
  errors: DefinitionError[];
}

type Placement = { kind: FileKind; name: string } | { misplaced: string } | undefined;

/** Which definition file a path is; undefined for files factoryd does not read (README, CI...). */
export function placementOf(path: string): Placement {
  const parts = path.split('/');
  if (path === 'factory.yaml') return { kind: 'factory', name: 'factory' };
  if (path === 'factory.yml') return { misplaced: 'rename to factory.yaml' };
  const [dir, name, file] = parts;
  switch (dir) {
    case 'agents':
      if (parts.length === 3 && file === 'agent.md') return { kind: 'agent', name };
      if (parts.length === 2 && name.endsWith('.md'))
        return { misplaced: `an agent is a folder: move it to agents/${name.slice(0, -3)}/agent.md` };
      return undefined;
    case 'automations':
      if (parts.length === 3 && file === 'automation.md') return { kind: 'automation', name };
      if (parts.length === 2 && name.endsWith('.md'))
        return {
          misplaced: `an automation is a folder: move it to automations/${name.slice(0, -3)}/automation.md`,
        };
      return undefined;
    case 'webhooks':
      if (parts.length === 2 && name.endsWith('.yaml')) return { kind: 'webhook', name: name.slice(0, -5) };
      if (parts.length === 2 && name.endsWith('.yml'))
        return { misplaced: `rename to webhooks/${name.slice(0, -4)}.yaml` };
      if (parts.length > 2)
        return { misplaced: 'webhook files sit directly in webhooks/: webhooks/<name>.yaml' };
      return undefined;
    case 'notifications':
      if (parts.length === 2 && name.endsWith('.yaml'))
        return { kind: 'notification', name: name.slice(0, -5) };
      if (parts.length === 2 && name.endsWith('.yml'))
        return { misplaced: `rename to notifications/${name.slice(0, -4)}.yaml` };
      if (parts.length > 2)
        return { misplaced: 'notification files sit directly in notifications/: notifications/<name>.yaml' };
      return undefined;
    case 'environments':
      if (parts.length === 2 && name.endsWith('.yaml'))
        return { kind: 'environment', name: name.slice(0, -5) };
      if (parts.length === 2 && name.endsWith('.yml'))
        return { misplaced: `rename to environments/${name.slice(0, -4)}.yaml` };
      if (parts.length > 2)
        return { misplaced: 'environment files sit directly in environments/: environments/<name>.yaml' };
      return undefined;
    case 'skills':
      if (parts.length === 3 && file === 'SKILL.md') return { kind: 'skill', name };
      return undefined;
    default:
      return undefined;
  }
}

/** Parses one file at `path` (already known to be a definition file) and checks its schema. */
export function parseDefinitionFile(
  kind: FileKind,
  name: string,
  path: string,
  content: string,
  schemas: SchemaRegistry,
): DefinitionFile {
  const yamlFile =
    kind === 'factory' || kind === 'webhook' || kind === 'notification' || kind === 'environment';
  const source = yamlFile ? SourceFile.yaml(path, content) : SourceFile.markdown(path, content);
  const errors = [...source.errors];
  const badName = kind === 'factory' ? undefined : nameProblem(name);
  if (badName) errors.push({ path, line: 1, message: badName });
  const schema = SCHEMA_OF[kind];
  if (schema && source.data !== undefined) {
    const whole = yamlFile ? 'the file' : 'the front matter';
    const violations = schemas.place(schema, source.data, `this ${kind}`);
    // A failed "one of these shapes" says it best; why each shape failed is noise.
    const shapes = violations
      .filter((v) => v.message.includes('must match exactly one allowed shape'))
      .map((v) => v.path);
    const noise = (path: string, message: string) =>
      !message.includes('must match exactly one allowed shape') &&
      shapes.some((p) => path === p || path.startsWith(`${p}.`));
    for (const v of violations) {
      if (noise(v.path, v.message)) continue;
      // A bad deliveryIdHeader gets its own message in the semantic checks, not the pattern.
      if (v.path === 'deliveryIdHeader' && v.message.includes('must match')) continue;
      const message = v.path === '' ? v.message.replace(/^body\b/, whole) : v.message;
      // An unknown or forbidden key is reported on its own line, not its parent's.
      errors.push({ path, line: source.lineOf(source.splitPath(v.key)), message });
    }
  }
  return { kind, name, source, errors };
}
