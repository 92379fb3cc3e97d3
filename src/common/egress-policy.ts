import { isIP } from 'node:net';
import { isPrivateAddress } from './outbound-url.js';

/**
 * Where a harness may connect through factoryd's egress proxy (docs/security.md, "A harness's
 * network"). Pure: the proxy (egress-proxy.ts) resolves names and asks here about each address.
 *
 * A destination passes when its host matches a rule and, after DNS, every address it resolves to is
 * public; an operator's trusted destination (a model provider's base URL) passes even on loopback.
 */

/** `host` exact, `*.domain` (any name below it), `*` (any public host); `port` undefined: 80 and 443. */
export interface EgressRule {
  host: string;
  port?: number;
}

export interface EgressPolicy {
  rules: EgressRule[];
  /** host:port the operator configured for model providers: allowed even when private or loopback. */
  trusted: Array<{ host: string; port: number }>;
}

/** What a run needs by default: its model providers' APIs, the common git hosts, package registries. */
export const DEFAULT_EGRESS_HOSTS = [
  // Model providers (the three built-in harnesses' CLIs).
  'api.anthropic.com',
  'api.openai.com',
  'generativelanguage.googleapis.com',
  // Git hosts (clone, fetch, push over https).
  'github.com',
  'api.github.com',
  'codeload.github.com',
  'objects.githubusercontent.com',
  'gitlab.com',
  'bitbucket.org',
  // Package registries.
  'registry.npmjs.org',
  'registry.yarnpkg.com',
  'pypi.org',
  'files.pythonhosted.org',
  'crates.io',
  'index.crates.io',
  'static.crates.io',
  'proxy.golang.org',
  'sum.golang.org',
  'rubygems.org',
  'repo.maven.apache.org',
  'repo1.maven.org',
];

/** The base URL variables of the built-in harnesses' providers, read from the service's environment. */
export const PROVIDER_BASE_URL_VARIABLES = [
  'ANTHROPIC_BASE_URL',
  'OPENAI_BASE_URL',
  'GOOGLE_GEMINI_BASE_URL',
];

/** One rule from `host`, `*.domain`, `*` or any of them with `:port`; undefined if it is none of these. */
export function parseEgressRule(text: string): EgressRule | undefined {
  const m = /^(\*|(?:\*\.)?[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?|\[[0-9a-f:.]+\])(?::(\d{1,5}))?$/i.exec(
    text.trim(),
  );
  if (!m) return undefined;
  const port = m[2] === undefined ? undefined : Number(m[2]);
  if (port !== undefined && (port < 1 || port > 65535)) return undefined;
  return { host: m[1]!.replace(/^\[|\]$/g, '').toLowerCase(), port };
}

/** The destination a provider's base URL names (its port by scheme when it has none), or undefined. */
export function baseUrlDestination(url: string): { host: string; port: number } | undefined {
  try {
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return undefined;
    const port = u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
    return { host: u.hostname.replace(/^\[|\]$/g, '').toLowerCase(), port };
  } catch {
    return undefined;
  }
}

/**
 * What a run's environment adds to the policy (EgressRun.allow): the host and port of each of its
 * repositories fetched over https, so a harness may fetch and push where the worker cloned from.
 * Only https: git reads the proxy variables for it, not for ssh:// or git://, which reach nothing
 * from a sandbox. A rule, not a trust: the host's addresses are checked like any other's, so a
 * repository on loopback or a private address stays out of reach (HARNESS_EGRESS_TRUST opens one).
 */
export function repositoryEgressRules(urls: readonly string[]): EgressRule[] {
  const rules = new Map<string, EgressRule>();
  for (const url of urls) {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      continue; // scp-like user@host:path, a local path
    }
    if (u.protocol !== 'https:' || !u.hostname) continue;
    const rule = { host: u.hostname.replace(/^\[|\]$/g, '').toLowerCase(), port: Number(u.port || 443) };
    rules.set(`${rule.host}:${rule.port}`, rule);
  }
  return [...rules.values()];
}

const hostMatches = (rule: string, host: string) =>
  rule === '*' ? !isIP(host) : rule.startsWith('*.') ? host.endsWith(rule.slice(1)) : rule === host;

/**
 * `trusted` (an operator's provider: no address check), `checked` (a rule allows the name: every
 * address it resolves to must be public), or why the destination is refused before any lookup.
 */
export function egressDecision(
  policy: EgressPolicy,
  host: string,
  port: number,
  extra: readonly EgressRule[] = [],
): { verdict: 'trusted' | 'checked' } | { verdict: 'refused'; reason: string } {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (policy.trusted.some((t) => t.host === h && t.port === port)) return { verdict: 'trusted' };
  const allowed = [...policy.rules, ...extra].some(
    (r) => hostMatches(r.host, h) && (r.port === undefined ? port === 443 || port === 80 : r.port === port),
  );
  return allowed ? { verdict: 'checked' } : { verdict: 'refused', reason: 'not in the egress allow list' };
}

/**
 * Why a harness must not connect to `address`: loopback, private (RFC 1918, CGNAT, ULA), link-local
 * and cloud metadata (169.254.169.254, fd00:ec2::254), multicast, unspecified. The notifications'
 * SSRF classification, shared.
 */
export function refusedAddress(address: string): string | undefined {
  return isPrivateAddress(address)
    ? `${address} is a loopback, private, link-local or reserved address`
    : undefined;
}
