import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { buildProgram } from '../src/cli/program.js';
import { fromRoot } from '../src/common/paths.js';
import { runCli } from './support/cli.js';

/** Runs `factoryd …` in this process; returns what it printed and its exit status. */
async function factoryd(...args: string[]): Promise<{ stdout: string; stderr: string; status: number }> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((c) => ((stdout += String(c)), true));
  const err = vi.spyOn(process.stderr, 'write').mockImplementation((c) => ((stderr += String(c)), true));
  process.exitCode = 0;
  try {
    await buildProgram()
      .exitOverride()
      .parseAsync(['node', 'factoryd', ...args]);
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
  const status = Number(process.exitCode ?? 0);
  process.exitCode = 0;
  return { stdout, stderr, status };
}

function folder(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'factoryd-validate-'));
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
  return dir;
}

describe('factoryd validate [DIR]', () => {
  const dirs: string[] = [];
  afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

  it('passes the example factory, reporting the checks it skipped offline', async () => {
    const r = await factoryd('validate', fromRoot('examples', 'factory'));
    expect(r.status).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout).toContain(
      'skipped: team secrets (secretName) were not checked: no factoryd serve runs on',
    );
    expect(r.stdout).toMatch(/13 definition files, valid/);
  });

  it('prints file:line: reason for every error and exits 1', async () => {
    const dir = folder({
      'factory.yaml': 'schemaVersion: v1alpha1\nname: broken\n',
      'agents/a/agent.md': '---\nagentType: FOREMAN\n---\n',
      'agents/b/agent.md': '---\nagentType: FOREMAN\n---\n',
      'webhooks/hook.yaml': 'authMode: signature\nsecretName: s\ndeliveryIdHeader: Cookie\n',
      'automations/x/automation.md':
        '---\nagent: nobody\ntriggers:\n  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: [hook]\n---\n',
    });
    dirs.push(dir);
    const r = await factoryd('validate', dir);
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split('\n')).toEqual([
      'agents/b/agent.md:2: a factory has exactly one foreman, and agents/a/agent.md already is one: make this agent CUSTOM',
      'automations/x/automation.md:2: agent "nobody" does not exist; agents: a, b',
      'automations/x/automation.md:7: "hook" is a file name, not a UID: use the UID of webhooks/hook.yaml (GET /api/v1/factory/{uid}/webhooks)',
      'webhooks/hook.yaml:1: signatureScheme is required with authMode: signature: set it to one of standard_webhooks, github, stripe, slack, shopify, gitlab, linear, sentry, pagerduty, vercel',
      'webhooks/hook.yaml:3: deliveryIdHeader may not be Cookie: it carries a credential or a signature, not a delivery id',
    ]);
    expect(r.stdout).toContain('5 errors');
  });

  it('--json prints one document', async () => {
    const dir = folder({ 'factory.yaml': 'name: 1\n' });
    dirs.push(dir);
    const r = await factoryd('validate', dir, '--json');
    expect(r.status).toBe(1);
    const doc = JSON.parse(r.stdout);
    expect(doc.valid).toBe(false);
    expect(doc.errors).toContainEqual({
      path: 'factory.yaml',
      line: 1,
      message: 'schemaVersion is required',
    });
  });

  it('as a child process: a key its mode does not allow is named at its own line, in words', async () => {
    const dir = folder({
      'factory.yaml': 'schemaVersion: v1alpha1\nname: first\n',
      'agents/lead/agent.md': '---\nagentType: FOREMAN\n---\nLead.\n',
      'webhooks/x.yaml':
        '# the CI webhook\ndescription: ci\nsecretName: ci-secret\nenabled: true\nauthMode: token\nsignatureScheme: github\n',
    });
    dirs.push(dir);
    const r = await runCli(['validate', dir, '--offline']);
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toEqual([
      'webhooks/x.yaml:6: signatureScheme is only for authMode: signature (this webhook uses authMode: token); remove it or set authMode: signature',
    ]);
  });
});
