import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import type { AuthContext } from '../auth/auth-context.js';
import { Clock } from '../common/clock.js';
import { newUid, UUID_PATTERN } from '../common/ids.js';
import { Conflict, NotFound } from '../common/problem.js';
import { resolveAgentConfig } from '../definitions/agent-config.js';
import type { AgentOverrides } from '../definitions/definition.js';
import { NamedAgents, type NamedAgentDefaults, type NamedAgentSource } from '../runs/named-agents.js';
import type { AgentConfig } from '../runs/run.js';
import { redactMcpCredentials } from '../secrets/mcp-credentials.js';
import { SecretCipher } from '../secrets/secret-cipher.js';
import {
  AgentIdentitiesRepository,
  type FactoryAgentRow,
  type IdentityDefaults,
  type StoredIdentity,
} from './agent-identities.repository.js';

/** A create or update body (schemas/api/agent-identity-*.schema.json), already validated. */
export type IdentityRequest = Record<string, unknown> & {
  name?: string;
  mcp_servers?: Record<string, unknown>;
  factory_uid?: string | null;
};

/** The fields a run takes from a named agent, and the run config key each becomes. */
const RUN_DEFAULTS: Array<[string, keyof AgentConfig]> = [
  ['base_model', 'model_id'],
  ['prompt', 'base_prompt'],
  ['environment_id', 'environment_id'],
  ['worker_host', 'worker_host'],
  ['harness', 'harness'],
  ['harness_auth_secrets', 'harness_auth_secrets'],
  ['inference_providers', 'inference_providers'],
  ['credential_strategy', 'credential_strategy'],
  ['default_runner_uid', 'runner_id'],
];

/** An empty value clears a field on update (the clients' convention): '', [], {}. */
const isEmpty = (v: unknown) =>
  v === '' ||
  (Array.isArray(v) && v.length === 0) ||
  (typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length === 0);

/**
 * Named agents (the clients' "agent identities"): defaults a run takes with `agent_identity_uid`.
 * The team's own are stored here; its factories' agents are listed beside them, read only (their
 * file is their source), under the uid of the applied agent.
 */
@Injectable()
export class AgentIdentitiesService implements NamedAgentSource, OnModuleInit {
  constructor(
    @Inject(AgentIdentitiesRepository) private readonly repo: AgentIdentitiesRepository,
    @Inject(SecretCipher) private readonly cipher: SecretCipher,
    @Inject(NamedAgents) private readonly namedAgents: NamedAgents,
    @Inject(Clock) private readonly clock: Clock,
  ) {}

  onModuleInit(): void {
    this.namedAgents.register(this);
  }

  async create(auth: AuthContext, req: IdentityRequest): Promise<Record<string, unknown>> {
    const now = this.clock.now();
    const uid = newUid();
    const { name, mcp_servers: mcp, ...rest } = req;
    await this.checkFactory(auth, rest.factory_uid);
    const identity: StoredIdentity = {
      uid,
      name: name!,
      defaults: Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== null && !isEmpty(v))),
      mcpSealed: mcp && !isEmpty(mcp) ? this.seal(uid, mcp) : null,
      createdAt: now,
      updatedAt: now,
    };
    await this.repo.insert(auth.team.id, identity);
    return this.present(identity);
  }

  /** Omitted or null: unchanged; empty: cleared; otherwise replaced. */
  async update(auth: AuthContext, uid: string, req: IdentityRequest): Promise<Record<string, unknown>> {
    const identity = await this.own(auth, uid);
    const { name, mcp_servers: mcp, ...rest } = req;
    await this.checkFactory(auth, rest.factory_uid);
    const defaults: IdentityDefaults = { ...identity.defaults };
    for (const [key, value] of Object.entries(rest)) {
      if (value === null || value === undefined) continue;
      if (key === 'memory') {
        const stores = (value as { attached_stores?: unknown[] | null }).attached_stores;
        if (stores === null || stores === undefined) continue;
        defaults.memory = { ...(defaults.memory as object), attached_stores: stores };
      } else if (isEmpty(value)) delete defaults[key];
      else defaults[key] = value;
    }
    const updated: StoredIdentity = {
      ...identity,
      name: name ?? identity.name,
      defaults,
      mcpSealed: mcp === undefined ? identity.mcpSealed : isEmpty(mcp) ? null : this.seal(uid, mcp),
      updatedAt: this.clock.now(),
    };
    await this.repo.update(auth.team.id, updated);
    return this.present(updated);
  }

  async delete(auth: AuthContext, uid: string): Promise<void> {
    await this.own(auth, uid);
    await this.repo.delete(auth.team.id, uid);
  }

  async get(auth: AuthContext, uid: string): Promise<Record<string, unknown>> {
    if (UUID_PATTERN.test(uid)) {
      const agent = await this.repo.factoryAgent(auth.team.id, uid);
      if (agent) return presentFactoryAgent(agent);
    }
    const identity = await this.repo.find(auth.team.id, uid);
    if (!identity) throw new NotFound(`agent ${uid} does not exist`);
    return this.present(identity);
  }

  async list(auth: AuthContext, factoryUid?: string): Promise<{ agents: Array<Record<string, unknown>> }> {
    const [own, factory] = await Promise.all([
      this.repo.list(auth.team.id, factoryUid),
      this.repo.factoryAgents(auth.team.id, factoryUid),
    ]);
    return { agents: [...factory.map(presentFactoryAgent), ...own.map((i) => this.present(i))] };
  }

  /** NamedAgentSource: what a run created with this uid takes (MCP credentials opened). */
  async defaults(teamId: string, uid: string): Promise<NamedAgentDefaults | undefined> {
    if (UUID_PATTERN.test(uid)) {
      const agent = await this.repo.factoryAgent(teamId, uid);
      if (agent)
        return {
          uid,
          name: agent.name,
          config: factoryAgentConfig(agent),
          metadata: { factory_uid: agent.factory_uid },
          factoryUid: agent.factory_uid,
        };
    }
    const identity = await this.repo.find(teamId, uid);
    if (!identity) return undefined;
    const d = identity.defaults;
    const config: AgentConfig = { name: identity.name };
    for (const [from, to] of RUN_DEFAULTS)
      if (d[from] !== undefined) (config as Record<string, unknown>)[to] = d[from];
    const skills = d.skills as string[] | undefined;
    if (skills?.length) {
      config.skills = skills;
      config.skill_spec = skills[0];
    }
    const stores = (d.memory as { attached_stores?: Array<Record<string, unknown>> } | undefined)
      ?.attached_stores;
    if (stores?.length) config.memory_stores = stores;
    if (identity.mcpSealed) config.mcp_servers = this.open(identity);
    const factoryUid = typeof d.factory_uid === 'string' && d.factory_uid ? d.factory_uid : undefined;
    return { uid, name: identity.name, config, ...(factoryUid ? { factoryUid } : {}) };
  }

  /** The team's own identity, or 404; a factory's agent is 409 (its file is its source). */
  private async own(auth: AuthContext, uid: string): Promise<StoredIdentity> {
    if (UUID_PATTERN.test(uid)) {
      const agent = await this.repo.factoryAgent(auth.team.id, uid);
      if (agent)
        throw new Conflict(
          `agent ${agent.name} is defined by agents/${agent.name}/agent.md in factory ${agent.factory_uid}; change that file`,
        );
    }
    const identity = await this.repo.find(auth.team.id, uid);
    if (!identity) throw new NotFound(`agent ${uid} does not exist`);
    return identity;
  }

  private async checkFactory(auth: AuthContext, factoryUid: unknown): Promise<void> {
    if (
      typeof factoryUid === 'string' &&
      factoryUid &&
      !(await this.repo.factoryExists(auth.team.id, factoryUid))
    )
      throw new NotFound(`factory ${factoryUid} does not exist`);
  }

  private seal(uid: string, mcp: Record<string, unknown>): Buffer {
    return this.cipher.encrypt(JSON.stringify(mcp), `agent-identity:${uid}:mcp_servers`);
  }

  private open(identity: StoredIdentity): Record<string, unknown> {
    return JSON.parse(
      this.cipher.decrypt(identity.mcpSealed!, `agent-identity:${identity.uid}:mcp_servers`),
    ) as Record<string, unknown>;
  }

  /** AgentResponse: every required field, the optional ones when set; MCP credentials redacted. */
  private present(i: StoredIdentity): Record<string, unknown> {
    const d = i.defaults;
    const memory = (d.memory ?? {}) as { attached_stores?: unknown[]; auto_memory?: { enabled?: boolean } };
    const { memory: _memory, ...shown } = d;
    return {
      ...shown,
      uid: i.uid,
      name: i.name,
      available: true,
      agent_type: d.agent_type ?? 'CUSTOM',
      description: d.description ?? null,
      prompt: d.prompt ?? null,
      factory_uid: d.factory_uid ?? null,
      default_runner_uid: d.default_runner_uid ?? '',
      on_behalf_of_enabled: d.on_behalf_of_enabled ?? false,
      memory: {
        attached_stores: memory.attached_stores ?? [],
        // factoryd keeps no memory store of an agent's own: shown as asked for, nothing behind it.
        auto_memory: { enabled: memory.auto_memory?.enabled ?? false },
      },
      secrets: d.secrets ?? [],
      skills: d.skills ?? [],
      ...(i.mcpSealed
        ? { mcp_servers: redactMcpCredentials({ mcp_servers: this.open(i) }).mcp_servers }
        : {}),
      created_at: i.createdAt.toISOString(),
      updated_at: i.updatedAt.toISOString(),
    };
  }
}

/** A factory agent's run config: factory.yaml's agentDefaults, then the agent's overrides. */
function factoryAgentConfig(a: FactoryAgentRow): AgentConfig {
  return resolveAgentConfig((a.agent_defaults ?? {}) as AgentOverrides, {
    name: a.name,
    overrides: a.overrides as AgentOverrides,
    basePrompt: a.base_prompt,
  });
}

function presentFactoryAgent(a: FactoryAgentRow): Record<string, unknown> {
  const c = redactMcpCredentials(factoryAgentConfig(a));
  return {
    uid: a.id,
    name: a.name,
    available: true,
    agent_type: a.agent_type,
    description: a.description,
    prompt: a.base_prompt || null,
    factory_uid: a.factory_uid,
    default_runner_uid: '',
    on_behalf_of_enabled: false,
    memory: { attached_stores: [], auto_memory: { enabled: false } },
    secrets: [],
    skills: [],
    ...(c.model_id !== undefined ? { base_model: c.model_id } : {}),
    ...(c.environment_id !== undefined ? { environment_id: c.environment_id } : {}),
    ...(c.worker_host !== undefined ? { worker_host: c.worker_host } : {}),
    ...(c.mcp_servers !== undefined ? { mcp_servers: c.mcp_servers } : {}),
    created_at: a.created_at.toISOString(),
    updated_at: a.updated_at.toISOString(),
  };
}
