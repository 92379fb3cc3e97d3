import { URL_SAFE } from '../secrets/secret-generator.js';
import type { SchemaRegistry } from '../common/schema-validator.js';
import type { DefinitionError, FactoryDefinition } from './definition.js';
import { parseDefinitionFile, placementOf, type DefinitionFile, type FileKind } from './definition-file.js';
import { checkAgents } from './rules/agents.js';
import { checkAutomations } from './rules/automations.js';
import { checkEnvironments } from './rules/environments.js';
import { checkFactory } from './rules/factory.js';
import { filesOf, Findings, type ValidationContext } from './rules/rule.js';
import { checkNotifications } from './rules/notifications.js';
import { checkSkills } from './rules/skills.js';
import { checkWebhooks } from './rules/webhooks.js';

export type { ValidationContext } from './rules/rule.js';
export { RESERVED_DELIVERY_ID_HEADERS } from './rules/webhooks.js';

export interface ValidationResult {
  /** Set only when there are no errors. */
  definition?: FactoryDefinition;
  errors: DefinitionError[];
  /** Checks that need the service and were not made (offline validation). */
  skipped: string[];
}

export type ParseFile<T> = (kind: FileKind, name: string, path: string, value: T) => DefinitionFile;

/**
 * The definition files of a tree ({path → what `parse` reads: the content, or a blob the caller can
 * read or find in its cache}), parsed and schema-checked, and the files that sit in the wrong place.
 */
export function parseTree<T>(
  tree: Map<string, T>,
  parse: ParseFile<T>,
): { files: DefinitionFile[]; misplaced: DefinitionError[] } {
  const files: DefinitionFile[] = [];
  const misplaced: DefinitionError[] = [];
  for (const [path, value] of tree) {
    const placement = placementOf(path);
    if (!placement) continue;
    if ('misplaced' in placement) misplaced.push({ path, line: 1, message: placement.misplaced });
    else files.push(parse(placement.kind, placement.name, path, value));
  }
  return { files, misplaced };
}

/** Parses and validates a whole tree ({path → content}). */
export function loadDefinition(
  tree: Map<string, string>,
  schemas: SchemaRegistry,
  ctx: ValidationContext = {},
): ValidationResult {
  const { files, misplaced } = parseTree(tree, (kind, name, path, content: string) =>
    parseDefinitionFile(kind, name, path, content, schemas),
  );
  return validateDefinition(files, ctx, misplaced);
}

/**
 * Every rule of a factory definition, one kind of file at a time (src/definitions/rules): one
 * foreman, the agents automations name, exactly one known webhook UID per trigger, filter limits, at
 * most 20 webhooks, secrets that exist (and are URL-safe for url_token). All errors are reported,
 * sorted by file and line.
 */
export function validateDefinition(
  files: DefinitionFile[],
  ctx: ValidationContext = {},
  misplaced: DefinitionError[] = [],
): ValidationResult {
  const findings = new Findings();
  findings.errors.push(...misplaced, ...files.flatMap((f) => f.errors));
  const factory = checkFactory(filesOf(files, 'factory'), findings);
  const { agents, foreman } = checkAgents(filesOf(files, 'agent'), findings, factory.file !== undefined);
  const webhooks = checkWebhooks(filesOf(files, 'webhook'), findings, ctx);
  const automations = checkAutomations(filesOf(files, 'automation'), {
    agents,
    foreman,
    webhooks,
    ctx,
    findings,
  });
  const skills = checkSkills(filesOf(files, 'skill'));
  const notifications = checkNotifications(filesOf(files, 'notification'), findings, ctx);
  const environments = checkEnvironments(filesOf(files, 'environment'), findings, ctx);

  const { errors, skipped } = findings;
  errors.sort((a, b) => a.path.localeCompare(b.path) || a.line - b.line);
  if (errors.length) return { errors, skipped };
  const { settings } = factory;
  return {
    errors,
    skipped,
    definition: {
      name: settings.name!,
      description: settings.description,
      agentDefaults: settings.agentDefaults ?? {},
      repositories: settings.repositories,
      agents,
      automations,
      webhooks,
      skills,
      // Only when there are some: definitions applied before notification files existed stay equal.
      ...(notifications.length ? { notifications } : {}),
      ...(environments.length ? { environments } : {}),
    },
  };
}

/** Whether a secret value may be a url_token. */
export function isUrlSafe(value: string): boolean {
  return URL_SAFE.test(value);
}
