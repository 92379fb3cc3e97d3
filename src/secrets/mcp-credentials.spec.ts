import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { McpCredentials, redactMcpCredentials } from './mcp-credentials.js';
import { SecretCipher } from './secret-cipher.js';

describe('MCP credentials', () => {
  const credentials = new McpCredentials(new SecretCipher(randomBytes(32)));
  const config = {
    name: 'n',
    mcp_servers: {
      gh: { url: 'https://mcp.example', headers: { Authorization: 'Bearer t0ken' } },
      local: { command: 'x-mcp', args: ['--stdio'], env: { API_KEY: 'k3y' } },
    },
  };

  it('seals every header and env value, keeps the rest, and opens back for the same run only', () => {
    const sealed = credentials.seal(config, 'run-1');
    expect(JSON.stringify(sealed)).not.toMatch(/t0ken|k3y/);
    expect(sealed.mcp_servers.gh.url).toBe('https://mcp.example');
    expect(McpCredentials.hasPlaintext(sealed)).toBe(false);
    expect(McpCredentials.hasPlaintext(config)).toBe(true);
    expect(credentials.open(sealed, 'run-1')).toEqual(config);
    expect(() => credentials.open(sealed, 'run-2')).toThrow();
  });

  it('redacts values, keeping names, on a run (mcp_servers) or in a definition (mcpServers)', () => {
    expect(redactMcpCredentials(config).mcp_servers).toEqual({
      gh: { url: 'https://mcp.example', headers: { Authorization: '[redacted]' } },
      local: { command: 'x-mcp', args: ['--stdio'], env: { API_KEY: '[redacted]' } },
    });
    expect(redactMcpCredentials({ mcpServers: config.mcp_servers }, 'mcpServers').mcpServers.gh).toEqual({
      url: 'https://mcp.example',
      headers: { Authorization: '[redacted]' },
    });
    expect(redactMcpCredentials({ name: 'no servers' })).toEqual({ name: 'no servers' });
  });
});
