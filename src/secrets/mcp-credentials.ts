import type { SecretCipher } from './secret-cipher.js';

/** What every read shows in place of an MCP server's credential. */
export const REDACTED = '[redacted]';

/** A credential as stored: AES-256-GCM under the secrets key, base64 (never a string, so never mistaken for one). */
interface Sealed {
  sealed: string;
}

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const isSealed = (v: unknown): v is Sealed => isObject(v) && typeof v.sealed === 'string';

/**
 * MCP servers carry their credentials in a remote server's `headers` (a bearer token) and a command
 * server's `env` (an API token): every value there, in a map of servers by name, goes through `fn`
 * (with a name for where it sits); the rest of the servers' config is kept as it is.
 */
function mapMcpCredentials(servers: unknown, fn: (value: unknown, where: string) => unknown): unknown {
  if (!isObject(servers)) return servers;
  return Object.fromEntries(
    Object.entries(servers).map(([name, server]) => {
      if (!isObject(server)) return [name, server];
      const copy = { ...server };
      for (const field of ['headers', 'env'] as const) {
        const values = server[field];
        if (isObject(values))
          copy[field] = Object.fromEntries(
            Object.entries(values).map(([key, v]) => [key, fn(v, `${name}.${field}.${key}`)]),
          );
      }
      return [name, copy];
    }),
  );
}

/** `config` with its servers (under `key`) mapped by `mapMcpCredentials`. */
function mapConfig<T extends object>(
  config: T,
  key: string,
  fn: (value: unknown, where: string) => unknown,
): T {
  const servers = (config as Json)[key];
  return servers === undefined ? config : { ...config, [key]: mapMcpCredentials(servers, fn) };
}

/**
 * `config` with every MCP credential shown as "[redacted]": header and variable names stay. `key` is
 * `mcp_servers` on a run, `mcpServers` in a factory's definition.
 */
export function redactMcpCredentials<T extends object>(config: T, key = 'mcp_servers'): T {
  return mapConfig(config, key, () => REDACTED);
}

/**
 * A run's MCP credentials at rest (docs/security.md, "MCP server credentials"): sealed with the
 * service's secrets key when the run is stored, each bound to its run and place (a value copied onto
 * another run or header does not open), and opened only for the harness that runs it.
 */
export class McpCredentials {
  constructor(private readonly cipher: SecretCipher) {}

  seal<T extends object>(config: T, runId: string): T {
    return mapConfig(config, 'mcp_servers', (v, where) =>
      typeof v === 'string'
        ? ({ sealed: this.cipher.encrypt(v, `run:${runId}:${where}`).toString('base64') } satisfies Sealed)
        : v,
    );
  }

  open<T extends object>(config: T, runId: string): T {
    return mapConfig(config, 'mcp_servers', (v, where) =>
      isSealed(v) ? this.cipher.decrypt(Buffer.from(v.sealed, 'base64'), `run:${runId}:${where}`) : v,
    );
  }

  /** Whether `config` holds a credential not sealed yet (a row written before sealing existed). */
  static hasPlaintext(config: object): boolean {
    let found = false;
    mapMcpCredentials((config as Json).mcp_servers, (v) => (found ||= typeof v === 'string'));
    return found;
  }
}
