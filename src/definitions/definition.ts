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

/** A size as people read it, with the exact byte count. */
export function bytes(n: number): string {
  const exact = `${n.toLocaleString('en-US')} bytes`;
  if (n < 1024) return exact;
  const unit = n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`;
  return `${unit} (${exact})`;
}

/** factory.yaml's agentDefaults, an agent's or an automation's overrides. */
export interface AgentOverrides {
  model?: string;
  environmentId?: string;
  workerHost?: string;
  mcpServers?: Record<string, unknown>;
  idleTimeoutMinutes?: number;
  /** The agent CLI that runs it (docs/harnesses.md). */
  harness?: 'oz' | 'claude' | 'codex' | 'gemini';
  reasoningLevel?: string;
  /** The harness's provider key: a team secret, or a self-hosted worker's own environment. */
  auth?: { managedSecret: string } | { workerEnvironment: true };
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
  filter: { webhook_ids: string[]; payload?: PayloadFilter; headers?: Record<string, unknown> };
}

/** A schedule trigger: a run at every time the cron (UTC) names (docs/schedules.md). */
export interface ScheduleTrigger {
  provider: 'schedule';
  event: 'cron_fired';
  filter: { cron_schedule: string };
}

export type AutomationTrigger = WebhookTrigger | ScheduleTrigger;

export interface AutomationDefinition {
  name: string;
  path: string;
  enabled: boolean;
  /** The agent that runs: the one named in the file, else the foreman. */
  agent: string;
  description?: string;
  triggers: AutomationTrigger[];
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

/** notifications/<name>.yaml: an endpoint the factory owns (docs/notifications.md). */
export interface NotificationDefinition {
  name: string;
  path: string;
  url: string;
  events: string[];
  secretName: string;
  enabled: boolean;
  description?: string;
}

/** environments/<name>.yaml: where a run works (docs/environments.md). */
export interface EnvironmentDefinition {
  name: string;
  path: string;
  description?: string;
  dockerImage?: string;
  network?: 'bridge' | 'none';
  repositories: Array<{
    url: string;
    /** The folder in the workspace (the repository's name when the file gives none). */
    path: string;
    branch?: string;
    ref?: string;
    credentialSecret?: string;
    username?: string;
  }>;
  setupCommands: string[];
  env: Record<string, string>;
  secrets: Record<string, string>;
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
  /** Absent in definitions stored before notification files existed. */
  notifications?: NotificationDefinition[];
  /** Absent in definitions stored before environment files existed. */
  environments?: EnvironmentDefinition[];
}

/**
 * What a factory's definition may weigh (docs/factories.md, "Limits and what a definition file may
 * hold"). Teams share one process: every limit here bounds the memory or the CPU one commit can take.
 */
export const DEFINITION_LIMITS = {
  /** Any definition file, checked from the listing (git ls-tree -l, stat) before it is read. */
  fileBytes: 1024 * 1024,
  /**
   * The YAML of a file: a whole factory.yaml or webhooks/<name>.yaml, or a Markdown file's front
   * matter. Data is small; YAML is costly to parse (a MiB of keys took 3 s) and to hold.
   */
  yamlBytes: 16 * 1024,
  /** Nodes of one YAML document: a parsed node holds about 150 bytes (60 KB of `1,1,…` took 4.5 MB). */
  yamlNodes: 2000,
  /** Definition files in one tree, and their bytes together. */
  treeFiles: 2000,
  treeBytes: 8 * 1024 * 1024,
  /** Collections inside collections in one YAML document (a payload filter needs about 16). */
  yamlDepth: 32,
  /** The `yaml` package's expansion guard: uses of an anchor times the aliases inside it. */
  yamlAliasCount: 100,
} as const;

/** At most this many live webhooks per factory. */
export const MAX_WEBHOOKS = 20;
