/**
 * The harnesses factoryd knows (docs/harnesses.md): `oz`, the team's or the service's harness command
 * speaking factoryd's protocol, and the built-in adapters around the vendors' CLIs. Pure: no I/O.
 */

export const HARNESS_TYPES = ['oz', 'claude', 'codex', 'gemini'] as const;
export type HarnessType = (typeof HARNESS_TYPES)[number];
export type BuiltInHarness = Exclude<HarnessType, 'oz'>;
export const BUILT_IN_HARNESSES: readonly BuiltInHarness[] = ['claude', 'codex', 'gemini'];

export const isHarnessType = (v: unknown): v is HarnessType =>
  typeof v === 'string' && (HARNESS_TYPES as readonly string[]).includes(v);

export const isBuiltInHarness = (v: unknown): v is BuiltInHarness =>
  (BUILT_IN_HARNESSES as readonly unknown[]).includes(v);

/** What each built-in harness is, and which of its provider's variables it takes from its environment. */
export interface HarnessInfo {
  /** As people call it. */
  title: string;
  /** The npm package `factoryd harnesses install` installs. */
  npmPackage: string;
  /** Its executable, on PATH and in the package's `.bin`. */
  bin: string;
  /** The variable that overrides where the CLI is (a path, or a command line). */
  commandVariable: string;
  /** The provider's key variable: a team secret's value becomes it. */
  keyVariable: string;
  /** The provider's base-URL variable: the operator's value passes through to this harness only. */
  baseUrlVariable: string;
  /** `harness_auth_secrets`' field naming this harness's secret (the clients'). */
  authSecretField?: string;
}

export const HARNESSES: Record<BuiltInHarness, HarnessInfo> = {
  claude: {
    title: 'Claude Code',
    npmPackage: '@anthropic-ai/claude-code',
    bin: 'claude',
    commandVariable: 'CLAUDE_COMMAND',
    keyVariable: 'ANTHROPIC_API_KEY',
    baseUrlVariable: 'ANTHROPIC_BASE_URL',
    authSecretField: 'claude_auth_secret_name',
  },
  codex: {
    title: 'Codex',
    npmPackage: '@openai/codex',
    bin: 'codex',
    commandVariable: 'CODEX_COMMAND',
    keyVariable: 'OPENAI_API_KEY',
    baseUrlVariable: 'OPENAI_BASE_URL',
    authSecretField: 'codex_auth_secret_name',
  },
  gemini: {
    title: 'Gemini CLI',
    npmPackage: '@google/gemini-cli',
    bin: 'gemini',
    commandVariable: 'GEMINI_COMMAND',
    keyVariable: 'GEMINI_API_KEY',
    baseUrlVariable: 'GOOGLE_GEMINI_BASE_URL',
  },
};

/** A run's harness as chosen: its type, and where its provider credential comes from. */
export interface HarnessChoice {
  type: HarnessType;
  /** The team secret whose value becomes the provider's key variable. */
  secretName?: string;
  /** The worker's own environment supplies the key (a self-hosted machine's). */
  workerEnvironment?: boolean;
}

/**
 * The harness of a run, first match: the run's `config.harness.type` (which already holds its agent
 * identity's or factory agent's harness, and the factory's agentDefaults, when the run was made
 * from one), then the team's default, then the service's (`oz`: HARNESS_COMMAND). The credential:
 * `harness.auth_secret_name`, else `harness_auth_secrets.<type>_auth_secret_name`, else the
 * agent's `auth`.
 */
export function chooseHarness(config: Record<string, unknown>, teamDefault?: string | null): HarnessChoice {
  const harness = asObject(config.harness);
  const type: HarnessType = isHarnessType(harness.type)
    ? harness.type
    : isHarnessType(teamDefault)
      ? teamDefault
      : 'oz';
  if (type === 'oz') return { type };
  const field = HARNESSES[type].authSecretField;
  const named = [harness.auth_secret_name, field ? asObject(config.harness_auth_secrets)[field] : undefined]
    .map((v) => (typeof v === 'string' && v.trim() ? v.trim() : undefined))
    .find(Boolean);
  if (named) return { type, secretName: named };
  if (harness.worker_environment === true) return { type, workerEnvironment: true };
  return { type };
}

function asObject(v: unknown): Record<string, unknown> {
  return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}
