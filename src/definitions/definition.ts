/**
 * A factory definition as read from its repository at one revision: what the reconciler applies.
 * Paths are repository paths (`agents/triage/agent.md`); names are the file or folder names.
 */
export interface DefinitionError {
  path: string;
  /** 1-based; the line of the offending key (1 when the whole file is at fault). */
  line: number;
  message: string;
}

export function formatError(e: DefinitionError): string {
  return `${e.path}:${e.line}: ${e.message}`;
}

/** factory.yaml's agentDefaults, an agent's or an automation's overrides. */
export interface AgentOverrides {
  model?: string;
  environmentId?: string;
  workerHost?: string;
  mcpServers?: Record<string, unknown>;
  idleTimeoutMinutes?: number;
}

export type AgentType = 'FOREMAN' | 'CUSTOM';

export interface AgentDefinition {
  name: string;
  path: string;
  agentType: AgentType;
  description?: string;
  overrides: AgentOverrides;
  basePrompt: string;
}

export type PayloadFilter = Record<string, unknown>;

export interface WebhookTrigger {
  provider: 'webhook';
  event: 'received';
  filter: { webhook_ids: string[]; payload?: PayloadFilter };
}

export interface AutomationDefinition {
  name: string;
  path: string;
  enabled: boolean;
  /** The agent that runs: the one named in the file, else the foreman. */
  agent: string;
  description?: string;
  triggers: WebhookTrigger[];
  overrides: AgentOverrides;
  prompt: string;
}

export const AUTH_MODES = ['token', 'url_token', 'signature'] as const;
export type AuthMode = (typeof AUTH_MODES)[number];

export interface WebhookDefinition {
  name: string;
  path: string;
  authMode: AuthMode;
  signatureScheme?: string;
  secretName: string;
  deliveryIdHeader?: string;
  enabled: boolean;
  description?: string;
}

export interface SkillDefinition {
  name: string;
  path: string;
  description?: string;
  content: string;
}

export interface FactoryDefinition {
  name: string;
  description?: string;
  agentDefaults: AgentOverrides;
  repositories?: string[];
  agents: AgentDefinition[];
  automations: AutomationDefinition[];
  webhooks: WebhookDefinition[];
  skills: SkillDefinition[];
}

/** At most this many live webhooks per factory. */
export const MAX_WEBHOOKS = 20;
