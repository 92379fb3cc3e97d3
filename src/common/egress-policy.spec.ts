import { describe, expect, it } from 'vitest';
import {
  baseUrlDestination,
  egressDecision,
  parseEgressRule,
  refusedAddress,
  repositoryEgressRules,
} from './egress-policy.js';

describe('egress policy', () => {
  const policy = {
    rules: ['api.anthropic.com', '*.example.org', 'git.internal:8443'].map((r) => parseEgressRule(r)!),
    trusted: [baseUrlDestination('http://127.0.0.1:4567/v1')!],
  };

  it('allows listed hosts on 80 and 443, a listed port only where given, and subdomains of *.domain', () => {
    expect(egressDecision(policy, 'api.anthropic.com', 443).verdict).toBe('checked');
    expect(egressDecision(policy, 'API.Anthropic.com', 80).verdict).toBe('checked');
    expect(egressDecision(policy, 'api.anthropic.com', 22).verdict).toBe('refused');
    expect(egressDecision(policy, 'a.b.example.org', 443).verdict).toBe('checked');
    expect(egressDecision(policy, 'example.org', 443).verdict).toBe('refused');
    expect(egressDecision(policy, 'evil-example.org', 443).verdict).toBe('refused');
    expect(egressDecision(policy, 'git.internal', 8443).verdict).toBe('checked');
    expect(egressDecision(policy, 'git.internal', 443).verdict).toBe('refused');
  });

  it('trusts the operator’s provider base URL exactly (host and port), nothing else on loopback', () => {
    expect(egressDecision(policy, '127.0.0.1', 4567).verdict).toBe('trusted');
    expect(egressDecision(policy, '127.0.0.1', 5432).verdict).toBe('refused');
    expect(egressDecision(policy, 'localhost', 4567).verdict).toBe('refused');
  });

  it('takes * as any public name, never an address literal', () => {
    const any = { rules: [parseEgressRule('*')!], trusted: [] };
    expect(egressDecision(any, 'anything.example', 443).verdict).toBe('checked');
    expect(egressDecision(any, '169.254.169.254', 80).verdict).toBe('refused');
    expect(egressDecision(any, '::1', 443).verdict).toBe('refused');
  });

  it('refuses loopback, private, CGNAT, ULA, link-local, metadata, multicast and unspecified addresses', () => {
    for (const a of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '100.64.0.1',
      '169.254.169.254',
      'fd00:ec2::254',
      'fc00::1',
      'fe80::1',
      '224.0.0.1',
      'ff02::1',
      '0.0.0.0',
      '::',
      '::1',
      '::ffff:127.0.0.1',
    ])
      expect(refusedAddress(a), a).toBeDefined();
    for (const a of ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'])
      expect(refusedAddress(a), a).toBeUndefined();
  });

  it('reads rules and base URLs, and refuses what is neither', () => {
    expect(parseEgressRule('Registry.NPMjs.org')).toEqual({ host: 'registry.npmjs.org', port: undefined });
    expect(parseEgressRule('[fd00::1]:8080')).toEqual({ host: 'fd00::1', port: 8080 });
    for (const bad of ['http://x.org', 'x.org:0', 'x.org:70000', '*x.org', 'a b', ''])
      expect(parseEgressRule(bad)).toBeUndefined();
    expect(baseUrlDestination('https://api.example.com')).toEqual({ host: 'api.example.com', port: 443 });
    expect(baseUrlDestination('http://[::1]:9/x')).toEqual({ host: '::1', port: 9 });
    expect(baseUrlDestination('ftp://x')).toBeUndefined();
  });

  it("adds an environment's https repository hosts for its runs, at their port, and nothing else", () => {
    const extra = repositoryEgressRules([
      'https://git.corp.example/acme/web.git',
      'https://GIT.corp.example/acme/other.git', // the same host: one rule
      'https://code.example.net:8443/x.git',
      'ssh://git@ssh.example.com/acme/x.git', // git does not use the proxy for ssh
      'git@scp.example.com:acme/x.git',
      'git://daemon.example.com/x.git',
      '/srv/repos/local',
    ]);
    expect(extra).toEqual([
      { host: 'git.corp.example', port: 443 },
      { host: 'code.example.net', port: 8443 },
    ]);
    expect(egressDecision(policy, 'git.corp.example', 443).verdict).toBe('refused');
    expect(egressDecision(policy, 'git.corp.example', 443, extra).verdict).toBe('checked');
    expect(egressDecision(policy, 'git.corp.example', 80, extra).verdict).toBe('refused');
    expect(egressDecision(policy, 'code.example.net', 8443, extra).verdict).toBe('checked');
    // Checked, not trusted: a repository on loopback is still refused after DNS.
    expect(
      egressDecision(policy, '127.0.0.1', 9443, repositoryEgressRules(['https://127.0.0.1:9443/x.git'])),
    ).toEqual({ verdict: 'checked' });
  });
});
