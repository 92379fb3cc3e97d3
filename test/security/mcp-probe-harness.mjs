// A harness for test/security/mcp-secrets.test.ts: it reports the MCP credentials it was handed, as
// sha256 digests (never the values), through the harness protocol. A committed file, because a
// sandboxed harness (bwrap) sees none of the test's temp folders.
import { createHash } from 'node:crypto';
const config = JSON.parse(process.env.FACTORYD_AGENT_CONFIG);
for (const server of Object.values(config.mcp_servers ?? {}))
  for (const field of ['headers', 'env'])
    for (const key of Object.keys(server[field] ?? {}))
      server[field][key] = 'sha256:' + createHash('sha256').update(String(server[field][key])).digest('hex');
const emit = (e) => process.stdout.write(JSON.stringify(e) + '\n');
process.stdin.once('data', () => {
  emit({ type: 'action', kind: 'probe', input: { config } });
  emit({ type: 'result', status: 'succeeded', message: 'probed' });
  process.exit(0);
});
