import { redactMcpCredentials } from '../secrets/mcp-credentials.js';
import type { AgentOverrides, FactoryDefinition } from '../definitions/definition.js';
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

/**
 * A factory as the clients' `Factory`, with factoryd's own fields beside it (its repository, branch,
 * apply status). What factoryd has no counterpart of is empty: no alias, avatar, integrations, scorers
 * or runners (docs/factories.md, "The factory API").
 */
export function presentFactory(f: FactoryRecord) {
  const definition = (f.definition ?? {}) as Partial<FactoryDefinition>;
  const defaults = definition.agentDefaults ?? {};
  const repositories = (definition.repositories ?? []).map(repositoryOf);
  const forges = [...new Set(repositories.flatMap((r) => (r.code_forge ? [r.code_forge] : [])))];
  return {
    uid: f.uid,
    name: f.name,
    description: f.description,
    team_uid: f.teamUid,
    alias: null,
    avatar_url: null,
    // The first forge the factory.yaml repositories name (GITHUB before GITLAB); NONE without one.
    code_forge: forges.find((c) => c !== 'AZURE_DEVOPS') ?? forges[0] ?? 'NONE',
    code_forges: forges.length ? forges : ['NONE'],
    repositories,
    // factoryd mints no tokens for a run: its credentials are the harness's (docs/harnesses.md).
    credential_strategy: 'EXECUTOR',
    default_environment: defaults.environmentId ?? null,
    default_model: defaults.model ?? null,
    agent_defaults: clientAgentDefaults(defaults),
    integrations: null,
    scorer_defaults: {},
    scoring: { default_model: null },
    team: f.teamName,
    repository: displayRepo(f.repoUrl),
    branch: f.branch,
    managed: f.managed,
    ready: f.ready,
    reason: f.reason,
    message: f.message,
    last_attempted_revision: f.lastAttemptedRevision,
    last_applied_revision: f.lastAppliedRevision,
    created_at: f.createdAt.toISOString(),
    updated_at: f.updatedAt.toISOString(),
  };
}

type CodeForge = 'GITHUB' | 'GITLAB' | 'AZURE_DEVOPS';

/**
 * A factory.yaml repository (`owner/repo`, a GitHub repository as everywhere in factoryd, or a clone
 * URL) as the clients' `{owner, repo, code_forge?}`: the forge by its host, when it is one of theirs.
 */
export function repositoryOf(spec: string): { owner: string; repo: string; code_forge?: CodeForge } {
  const url = /^(?:[a-z+]+:\/\/(?:[^@/]+@)?|[^@/]+@)([^/:]+)(?::\d+)?[:/](.+)$/i.exec(spec.trim());
  // A bare `owner/repo` is GitHub's; a local path or any other URL names no forge.
  const bare = /^[^:./~][^:]*$/.test(spec.trim());
  const [host, path] = url ? [url[1]!.toLowerCase(), url[2]!] : [bare ? 'github.com' : '', spec.trim()];
  const parts = path
    .replace(/\.git$/, '')
    .replace(/\/+$/, '')
    .split('/');
  const repo = parts.pop() ?? '';
  const forge: CodeForge | undefined =
    host === 'github.com'
      ? 'GITHUB'
      : host.startsWith('gitlab.')
        ? 'GITLAB'
        : host === 'dev.azure.com' || host.endsWith('.visualstudio.com')
          ? 'AZURE_DEVOPS'
          : undefined;
  return { owner: parts.join('/'), repo, ...(forge ? { code_forge: forge } : {}) };
}

/**
 * factory.yaml's agentDefaults as the clients' AgentDefaults: snake_case, MCP credentials redacted,
 * the harness and its key's team secret where their type has a place for them. The model and the
 * environment are the factory's `default_model` and `default_environment`.
 */
function clientAgentDefaults(d: AgentOverrides) {
  const harness = d.harness && {
    type: d.harness,
    ...(d.harness !== 'oz' && d.model ? { model_id: d.model } : {}),
    ...(d.reasoningLevel ? { reasoning_level: d.reasoningLevel } : {}),
  };
  const secret = d.auth && 'managedSecret' in d.auth ? d.auth.managedSecret : undefined;
  const authField =
    d.harness === 'claude'
      ? 'claude_auth_secret_name'
      : d.harness === 'codex'
        ? 'codex_auth_secret_name'
        : undefined;
  return {
    default_runner_uid: '',
    mcp_servers: redactMcpCredentials({ mcp_servers: d.mcpServers ?? {} }).mcp_servers,
    secrets: [],
    worker_host: d.workerHost ?? '',
    ...(harness ? { harness } : {}),
    ...(secret && authField ? { harness_auth_secrets: { [authField]: secret } } : {}),
    ...(d.idleTimeoutMinutes !== undefined ? { idle_timeout_minutes: d.idleTimeoutMinutes } : {}),
  };
}

/** `{base}/webhooks/w/<uid>`; a url_token URL ends in a `{token}` placeholder (the token is never shown). */
function ingressUrl(base: string, w: Pick<WebhookRow, 'uid' | 'auth_mode'>): string {
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
