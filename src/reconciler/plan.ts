import type {
  AgentDefinition,
  AutomationDefinition,
  EnvironmentDefinition,
  FactoryDefinition,
  NotificationDefinition,
  SkillDefinition,
  WebhookDefinition,
} from '../definitions/definition.js';

/** A row of the applied state, keyed by its file path. */
export interface AppliedRow {
  id: string;
  path: string;
  name: string;
  deleted: boolean;
  /** The row's fields in the same shape the definition has, to compare. */
  fields: Record<string, unknown>;
}

export interface AppliedWebhook extends AppliedRow {
  uid: string;
  secretVersionId: string | null;
}

export interface AppliedState {
  agents: AppliedRow[];
  automations: AppliedRow[];
  skills: AppliedRow[];
  webhooks: AppliedWebhook[];
  /** The endpoints notifications/<name>.yaml made (their secret version pinned like a webhook's). */
  notifications?: Array<AppliedRow & { secretVersionId: string | null }>;
  /** The environments environments/<name>.yaml made. */
  environments?: AppliedRow[];
}

export interface KindPlan<T> {
  create: T[];
  update: T[];
  /** Paths of live rows whose file is gone. */
  delete: string[];
}

export interface WebhookPlan extends KindPlan<WebhookDefinition> {
  /** Live webhooks by path (new ones get a UID when the plan applies). */
  live: Map<string, AppliedWebhook>;
}

export interface Plan {
  agents: KindPlan<AgentDefinition>;
  automations: KindPlan<AutomationDefinition>;
  skills: KindPlan<SkillDefinition>;
  webhooks: WebhookPlan;
  notifications: KindPlan<NotificationDefinition>;
  environments: KindPlan<EnvironmentDefinition>;
  /** Secret version each webhook applies with, by secret name. */
  secretVersions: Map<string, string>;
}

type KindSummary = { created: string[]; updated: string[]; deleted: string[] };

/** `notifications`, `environments` only when the plan changes some (summaries recorded before them stay the same). */
export type PlanSummary = Record<'agents' | 'automations' | 'skills' | 'webhooks', KindSummary> & {
  notifications?: KindSummary;
  environments?: KindSummary;
};

/** The fields of each kind that the database keeps, in definition shape. */
export const fieldsOf = {
  agent: (a: AgentDefinition) => ({
    name: a.name,
    agentType: a.agentType,
    description: a.description ?? null,
    overrides: a.overrides,
    basePrompt: a.basePrompt,
  }),
  automation: (a: AutomationDefinition) => ({
    name: a.name,
    enabled: a.enabled,
    agent: a.agent,
    triggers: a.triggers,
    overrides: a.overrides,
    prompt: a.prompt,
  }),
  skill: (s: SkillDefinition) => ({ name: s.name, description: s.description ?? null, content: s.content }),
  webhook: (w: WebhookDefinition) => ({
    name: w.name,
    authMode: w.authMode,
    signatureScheme: w.signatureScheme ?? null,
    secretName: w.secretName,
    deliveryIdHeader: w.deliveryIdHeader ?? null,
    enabled: w.enabled,
    description: w.description ?? null,
  }),
  notification: (n: NotificationDefinition) => ({
    url: n.url,
    events: n.events,
    secretName: n.secretName,
    enabled: n.enabled,
    description: n.description ?? null,
  }),
  environment: ({ name: _n, path: _p, ...config }: EnvironmentDefinition) => environmentConfig(config),
};

/** An environment's stored config: its file's content in definition shape, absent keys left out. */
function environmentConfig(e: Omit<EnvironmentDefinition, 'name' | 'path'>): Record<string, unknown> {
  return JSON.parse(JSON.stringify(e)) as Record<string, unknown>;
}

/**
 * What applying `def` changes, by file path: rows to create (or revive), to update, and live rows to
 * tombstone. With `repin` (a new revision), a webhook whose pinned secret version is not the
 * current one is updated too: a new secret value takes effect with the next applied change.
 */
export function planChanges(
  def: FactoryDefinition,
  applied: AppliedState,
  currentSecretVersions: Map<string, string>,
  repin: boolean,
): Plan {
  const live = new Map(applied.webhooks.filter((w) => !w.deleted).map((w) => [w.path, w]));
  const webhooks = diff(
    def.webhooks,
    applied.webhooks.filter((w) => !w.deleted),
    fieldsOf.webhook,
    (w, row) =>
      repin && (row as AppliedWebhook).secretVersionId !== (currentSecretVersions.get(w.secretName) ?? null),
  );
  return {
    agents: diff(def.agents, applied.agents, fieldsOf.agent),
    automations: diff(def.automations, applied.automations, fieldsOf.automation),
    skills: diff(def.skills, applied.skills, fieldsOf.skill),
    webhooks: { ...webhooks, live },
    notifications: diff(
      def.notifications ?? [],
      applied.notifications ?? [],
      fieldsOf.notification,
      (n, row) =>
        repin &&
        (row as AppliedRow & { secretVersionId: string | null }).secretVersionId !==
          (currentSecretVersions.get(n.secretName) ?? null),
    ),
    environments: diff(def.environments ?? [], applied.environments ?? [], fieldsOf.environment),
    secretVersions: currentSecretVersions,
  };
}

export function isEmpty(plan: Plan): boolean {
  return [
    plan.agents,
    plan.automations,
    plan.skills,
    plan.webhooks,
    plan.notifications,
    plan.environments,
  ].every((k) => k.create.length + k.update.length + k.delete.length === 0);
}

export function summarize(plan: Plan): PlanSummary {
  const names = <T extends { name: string }>(k: KindPlan<T>) => ({
    created: k.create.map((x) => x.name),
    updated: k.update.map((x) => x.name),
    deleted: k.delete.map((p) => nameOfPath(p)),
  });
  return {
    agents: names(plan.agents),
    automations: names(plan.automations),
    skills: names(plan.skills),
    webhooks: names(plan.webhooks),
    ...(changes(plan.notifications) ? { notifications: names(plan.notifications) } : {}),
    ...(changes(plan.environments) ? { environments: names(plan.environments) } : {}),
  };
}

const changes = <T>(k: KindPlan<T>) => k.create.length + k.update.length + k.delete.length > 0;

function diff<T extends { path: string }>(
  wanted: T[],
  rows: AppliedRow[],
  fields: (t: T) => Record<string, unknown>,
  alsoChanged: (t: T, row: AppliedRow) => boolean = () => false,
): KindPlan<T> {
  const byPath = new Map(rows.map((r) => [r.path, r]));
  const plan: KindPlan<T> = { create: [], update: [], delete: [] };
  for (const t of wanted) {
    const row = byPath.get(t.path);
    if (!row || row.deleted) plan.create.push(t);
    else if (!sameJson(fields(t), row.fields) || alsoChanged(t, row)) plan.update.push(t);
  }
  const paths = new Set(wanted.map((t) => t.path));
  for (const r of rows) if (!r.deleted && !paths.has(r.path)) plan.delete.push(r.path);
  return plan;
}

/** Deep equality of JSON values, key order ignored. */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a).filter((k) => (a as Record<string, unknown>)[k] !== undefined);
  const kb = Object.keys(b).filter((k) => (b as Record<string, unknown>)[k] !== undefined);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

function nameOfPath(path: string): string {
  const parts = path.split('/');
  return ['webhooks', 'notifications', 'environments'].includes(parts[0]!)
    ? parts[1]!.replace(/\.yaml$/, '')
    : parts[1];
}
