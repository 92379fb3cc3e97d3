import { URL_SAFE } from '../secrets/secret-generator.js';
import type { SchemaRegistry } from '../common/schema-validator.js';
import {
  MAX_WEBHOOKS,
  type AgentDefinition,
  type AgentOverrides,
  type AutomationDefinition,
  type DefinitionError,
  type FactoryDefinition,
  type SkillDefinition,
  type WebhookDefinition,
  type AutomationTrigger,
} from './definition.js';
import { parseDefinitionFile, placementOf, type DefinitionFile, type FileKind } from './definition-file.js';
import { checkFilterLimits } from './filter-limits.js';
import { scheduleTriggerErrors } from './schedule-trigger.js';

/** What only the service knows: the factory's webhook UIDs and the team's secrets. Absent offline. */
export interface ValidationContext {
  /** Every webhook this factory ever had, live or deleted. */
  knownWebhooks?: Array<{ uid: string; name: string; path: string; deleted: boolean }>;
  /** The team's secrets: whether the current value of each is URL-safe. */
  secrets?: Map<string, { urlSafe: boolean }>;
  team?: string;
  /** Why the checks that need the service were not made, when they were not (default: no database). */
  uncheckedBecause?: string;
}

export interface ValidationResult {
  /** Set only when there are no errors. */
  definition?: FactoryDefinition;
  errors: DefinitionError[];
  /** Checks that need the service and were not made (offline validation). */
  skipped: string[];
}

/** Header names a delivery id may not come from: credentials, cookies and signatures. */
export const RESERVED_DELIVERY_ID_HEADERS = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'x-hub-signature',
  'x-hub-signature-256',
  'stripe-signature',
  'webhook-signature',
  'webhook-timestamp',
  'svix-signature',
  'svix-timestamp',
  'x-slack-signature',
  'x-slack-request-timestamp',
  'x-shopify-hmac-sha256',
  'x-gitlab-token',
  'linear-signature',
  'sentry-hook-signature',
  'x-pagerduty-signature',
  'x-vercel-signature',
]);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;

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
 * Every rule of a factory definition across its files: one foreman, the agents automations name,
 * exactly one known webhook UID per trigger, filter limits, at most 20 webhooks, secrets that exist
 * (and are URL-safe for url_token). All errors are reported, sorted by file and line.
 */
export function validateDefinition(
  files: DefinitionFile[],
  ctx: ValidationContext = {},
  misplaced: DefinitionError[] = [],
): ValidationResult {
  const errors: DefinitionError[] = [...misplaced, ...files.flatMap((f) => f.errors)];
  const skipped: string[] = [];
  const valid = (f: DefinitionFile) => f.errors.length === 0;
  const of = (kind: DefinitionFile['kind']) =>
    files.filter((f) => f.kind === kind).sort((a, b) => a.source.path.localeCompare(b.source.path));

  const factoryFile = of('factory')[0];
  if (!factoryFile)
    errors.push({ path: 'factory.yaml', line: 1, message: 'missing: every factory needs a factory.yaml' });
  const factoryData = (factoryFile && valid(factoryFile) ? factoryFile.source.data : {}) as {
    name?: string;
    description?: string;
    agentDefaults?: AgentOverrides;
    repositories?: string[];
  };

  const agents: AgentDefinition[] = of('agent').map((f) => {
    const d = (valid(f) ? f.source.data : {}) as {
      description?: string;
      agentType?: 'FOREMAN' | 'CUSTOM';
      overrides?: AgentOverrides;
    };
    return {
      name: f.name,
      path: f.source.path,
      agentType: d.agentType ?? 'CUSTOM',
      description: d.description,
      overrides: d.overrides ?? {},
      basePrompt: f.source.body.trim(),
    };
  });
  const agentFiles = new Map(of('agent').map((f) => [f.name, f]));
  const foremen = agents.filter((a) => a.agentType === 'FOREMAN');
  if (foremen.length === 0 && of('agent').every(valid)) {
    errors.push({
      path: factoryFile ? 'factory.yaml' : 'agents',
      line: 1,
      message: 'no agent is the foreman: set `agentType: FOREMAN` in exactly one agents/<name>/agent.md',
    });
  }
  for (const extra of foremen.slice(1)) {
    const file = agentFiles.get(extra.name)!;
    errors.push({
      path: extra.path,
      line: file.source.lineOf(['agentType']),
      message: `a factory has exactly one foreman, and ${foremen[0].path} already is one: make this agent CUSTOM`,
    });
  }

  const webhooks: WebhookDefinition[] = [];
  const webhookFiles = of('webhook');
  webhookFiles.forEach((f, i) => {
    const d = (valid(f) ? f.source.data : {}) as Partial<WebhookDefinition>;
    const w: WebhookDefinition = {
      name: f.name,
      path: f.source.path,
      authMode: d.authMode ?? 'token',
      signatureScheme: d.signatureScheme,
      secretName: d.secretName ?? '',
      deliveryIdHeader: d.deliveryIdHeader,
      enabled: d.enabled ?? true,
      description: d.description,
    };
    webhooks.push(w);
    if (i === MAX_WEBHOOKS) {
      errors.push({
        path: f.source.path,
        line: 1,
        message: `a factory has at most ${MAX_WEBHOOKS} webhooks and this one has ${webhookFiles.length}: remove ${webhookFiles.length - MAX_WEBHOOKS} (this is the first beyond the limit, in name order)`,
      });
    }
    const header = (f.source.data as { deliveryIdHeader?: unknown } | undefined)?.deliveryIdHeader;
    if (typeof header === 'string') {
      const line = f.source.lineOf(['deliveryIdHeader']);
      if (!HEADER_NAME.test(header)) {
        errors.push({
          path: w.path,
          line,
          message: `deliveryIdHeader "${header}" is not a valid HTTP header name`,
        });
      } else if (RESERVED_DELIVERY_ID_HEADERS.has(header.toLowerCase())) {
        errors.push({
          path: w.path,
          line,
          message: `deliveryIdHeader may not be ${header}: it carries a credential or a signature, not a delivery id`,
        });
      }
    }
    if (!valid(f)) return;
    if (!ctx.secrets) return;
    const secret = ctx.secrets.get(w.secretName);
    const line = f.source.lineOf(['secretName']);
    const team = ctx.team ? ` --team ${ctx.team}` : '';
    if (!secret) {
      errors.push({
        path: w.path,
        line,
        message: `secret "${w.secretName}" does not exist${ctx.team ? ` in team ${ctx.team}` : ''}: create it with \`factoryd secrets set ${w.secretName}${team}\``,
      });
    } else if (w.authMode === 'url_token' && !secret.urlSafe) {
      errors.push({
        path: w.path,
        line,
        message: `secret "${w.secretName}" is not URL-safe (only A-Z a-z 0-9 . _ ~ -), so it cannot be a url_token: set a new value with \`factoryd secrets set ${w.secretName}${team} --generate url-safe\``,
      });
    }
  });
  if (!ctx.secrets && webhookFiles.length)
    skipped.push(`team secrets (secretName) were not checked: ${ctx.uncheckedBecause ?? 'no database'}`);

  const automations: AutomationDefinition[] = [];
  const liveUidByPath = new Map(
    (ctx.knownWebhooks ?? []).filter((w) => !w.deleted).map((w) => [w.path, w.uid]),
  );
  const knownUids = new Set((ctx.knownWebhooks ?? []).map((w) => w.uid));
  const webhookByRef = new Map<string, WebhookDefinition>();
  for (const w of webhooks) for (const ref of [w.name, `${w.name}.yaml`, w.path]) webhookByRef.set(ref, w);
  let uidsSkipped = false;
  for (const f of of('automation')) {
    if (!valid(f)) continue;
    const d = f.source.data as {
      enabled?: boolean;
      agent?: string;
      description?: string;
      triggers: AutomationTrigger[];
      overrides?: AgentOverrides;
    };
    if (d.agent !== undefined && !agentFiles.has(d.agent)) {
      errors.push({
        path: f.source.path,
        line: f.source.lineOf(['agent']),
        message: `agent "${d.agent}" does not exist; agents: ${agents.map((a) => a.name).join(', ') || 'none'}`,
      });
    }
    d.triggers.forEach((t, i) => {
      if (t.provider === 'schedule') return errors.push(...scheduleTriggerErrors(f, t, i));
      const at = ['triggers', i, 'filter', 'webhook_ids'];
      const line = f.source.lineOf(at);
      const ids = t.filter.webhook_ids;
      if (ids.length !== 1) {
        errors.push({
          path: f.source.path,
          line,
          message: `a trigger selects exactly one webhook UID; this one lists ${ids.length === 0 ? 'none' : ids.length}`,
        });
      }
      ids.forEach((id, j) => {
        const idLine = f.source.lineOf([...at, j]);
        const byName = webhookByRef.get(id);
        if (byName) {
          const uid = liveUidByPath.get(byName.path);
          errors.push({
            path: f.source.path,
            line: idLine,
            message: uid
              ? `"${id}" is a file name, not a UID: use the UID ${uid} of ${byName.path}`
              : ctx.knownWebhooks
                ? `"${id}" is a file name, not a UID, and ${byName.path} has no UID until it first applies: commit the webhook first, then use the UID it gets (GET /api/v1/factory/{uid}/webhooks)`
                : `"${id}" is a file name, not a UID: use the UID of ${byName.path} (GET /api/v1/factory/{uid}/webhooks)`,
          });
        } else if (!ctx.knownWebhooks) {
          uidsSkipped = true;
        } else if (!knownUids.has(id)) {
          const live = (ctx.knownWebhooks ?? []).filter((w) => !w.deleted);
          errors.push({
            path: f.source.path,
            line: idLine,
            message: `UID "${id}" is not a webhook of this factory; ${
              live.length
                ? `its webhooks: ${live.map((w) => `${w.path} (${w.uid})`).join(', ')}`
                : 'it has no webhooks yet'
            }`,
          });
        }
      });
      const payload = t.filter.payload;
      if (payload !== undefined) {
        for (const problem of checkFilterLimits(payload)) {
          errors.push({
            path: f.source.path,
            line: f.source.lineOf(['triggers', i, 'filter', 'payload']),
            message: problem,
          });
        }
      }
    });
    automations.push({
      name: f.name,
      path: f.source.path,
      enabled: d.enabled ?? true,
      agent: d.agent ?? foremen[0]?.name ?? '',
      description: d.description,
      triggers: d.triggers,
      overrides: d.overrides ?? {},
      prompt: f.source.body.trim(),
    });
  }
  if (uidsSkipped)
    skipped.push(`webhook UIDs in triggers were not checked: ${ctx.uncheckedBecause ?? 'no database'}`);

  const skills: SkillDefinition[] = of('skill').map((f) => ({
    name: f.name,
    path: f.source.path,
    description:
      typeof (f.source.data as { description?: unknown })?.description === 'string'
        ? (f.source.data as { description: string }).description
        : undefined,
    content: f.source.body,
  }));

  errors.sort((a, b) => a.path.localeCompare(b.path) || a.line - b.line);
  if (errors.length) return { errors, skipped };
  return {
    errors,
    skipped,
    definition: {
      name: factoryData.name!,
      description: factoryData.description,
      agentDefaults: factoryData.agentDefaults ?? {},
      repositories: factoryData.repositories,
      agents,
      automations,
      webhooks,
      skills,
    },
  };
}

/** Whether a secret value may be a url_token. */
export function isUrlSafe(value: string): boolean {
  return URL_SAFE.test(value);
}
