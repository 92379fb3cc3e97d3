import { redactMcpCredentials } from '../secrets/mcp-credentials.js';
import type { FactoryRecord } from '../reconciler/definition-store.js';
import type { ApplyRow, DefinitionRows, WebhookRow } from './factories.repository.js';

/** A repository URL without credentials (a clone URL may carry a token). */
export function displayRepo(repoUrl: string): string {
  try {
    const url = new URL(repoUrl);
    url.username = '';
    url.password = '';
    return url.toString();
  } catch {
    return repoUrl;
  }
}

export function presentFactory(f: FactoryRecord) {
  return {
    uid: f.uid,
    name: f.name,
    description: f.description,
    team: f.teamName,
    repository: displayRepo(f.repoUrl),
    branch: f.branch,
    managed: f.managed,
    ready: f.ready,
    reason: f.reason,
    message: f.message,
    last_attempted_revision: f.lastAttemptedRevision,
    last_applied_revision: f.lastAppliedRevision,
    agent_defaults: f.definition?.agentDefaults
      ? redactMcpCredentials(f.definition.agentDefaults as Record<string, unknown>, 'mcpServers')
      : null,
    created_at: f.createdAt.toISOString(),
    updated_at: f.updatedAt.toISOString(),
  };
}

/** `{base}/webhooks/w/<uid>`; a url_token URL ends in a `{token}` placeholder (the token is never shown). */
export function ingressUrl(base: string, w: Pick<WebhookRow, 'uid' | 'auth_mode'>): string {
  return `${base}/webhooks/w/${w.uid}${w.auth_mode === 'url_token' ? '/{token}' : ''}`;
}

export function presentWebhook(w: WebhookRow, base: string) {
  return {
    uid: w.uid,
    name: w.name,
    auth_mode: w.auth_mode,
    ...(w.signature_scheme ? { signature_scheme: w.signature_scheme } : {}),
    secret_name: w.secret_name,
    ...(w.delivery_id_header ? { delivery_id_header: w.delivery_id_header } : {}),
    enabled: w.enabled,
    deleted: w.deleted,
    ingress_url: ingressUrl(base, w),
    created_at: w.created_at.toISOString(),
  };
}

export function presentApply(a: ApplyRow) {
  return {
    revision: a.revision,
    result: a.result,
    reason: a.reason,
    errors: a.errors,
    plan: a.plan,
    started_at: a.started_at.toISOString(),
    duration_ms: a.duration_ms,
  };
}

/** Agents, automations (each webhook trigger naming its webhooks) and skills of the applied definition. */
export function presentDefinition(d: DefinitionRows) {
  const names = new Map(d.webhookNames.map((w) => [w.uid, w]));
  return {
    agents: d.agents.map((a) => ({
      name: a.name,
      path: a.path,
      agent_type: a.agent_type,
      description: a.description,
    })),
    automations: d.automations.map((a) => ({
      name: a.name,
      path: a.path,
      enabled: a.enabled,
      agent: a.agent_name,
      triggers: a.triggers.map((t) => ({
        ...t,
        webhooks: (t.filter?.webhook_ids ?? []).map((uid) => ({
          uid,
          name: names.get(uid)?.name ?? null,
          deleted: names.get(uid)?.deleted ?? false,
        })),
      })),
    })),
    skills: d.skills.map((s) => ({ name: s.name, path: s.path, description: s.description })),
  };
}
