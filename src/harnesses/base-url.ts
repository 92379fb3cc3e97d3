/**
 * A team's own base URL for a model provider (docs/harnesses.md, "A team's base URL"): `factoryd teams
 * set-base-url TEAM --provider anthropic URL`. It overrides the operator's (ANTHROPIC_BASE_URL, …) for
 * that team's runs of that provider's harnesses only. Pure: no I/O.
 *
 * Unlike the operator's base URLs, a team's is not trusted by the harnesses' egress proxy: it is a
 * rule there (its host and port), and the addresses it resolves to must be public. One on a
 * loopback, private or link-local address literal (or `localhost`) is refused at once, when it is
 * set and again when a run is claimed, unless the operator's own trust (HARNESS_EGRESS_TRUST, or a
 * provider's base URL) names that host and port: a team must not point its harness, and its key, at
 * the service's internal addresses through this.
 */
import { isInternalHost } from '../common/outbound-url.js';
import { baseUrlDestination, type EgressRule } from '../common/egress-policy.js';
import type { BuiltInHarness } from './harness-types.js';

export const PROVIDERS = ['anthropic', 'openai', 'gemini'] as const;
export type Provider = (typeof PROVIDERS)[number];

export const isProvider = (v: unknown): v is Provider =>
  typeof v === 'string' && (PROVIDERS as readonly string[]).includes(v);

/** The provider behind each built-in harness. */
export const HARNESS_PROVIDER: Record<BuiltInHarness, Provider> = {
  claude: 'anthropic',
  codex: 'openai',
  gemini: 'gemini',
};

/** A team's base URLs by provider, as stored (teams.harness_base_urls). */
export type TeamBaseUrls = Partial<Record<Provider, string>>;

/** Longer than any real API's base URL; keeps the column and the environment small. */
const MAX_LENGTH = 2048;

/**
 * The URL as stored (no trailing slash), or throws with what to fix: an absolute http:// or https://
 * URL, with no user or password (a key belongs in a team secret, where it is sealed and never shown),
 * no query or fragment (the CLIs append paths to it).
 */
export function parseBaseUrl(text: string): string {
  const value = text.trim();
  if (!value || value.length > MAX_LENGTH || /[\s\0]/.test(value))
    throw new Error(
      `the base URL must be an absolute URL of at most ${MAX_LENGTH} characters, without spaces`,
    );
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new Error(`"${value}" is not an absolute URL, e.g. https://gateway.example.com/v1`);
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:')
    throw new Error(`the base URL must start with https:// (or http://), got ${u.protocol}//`);
  if (!u.hostname) throw new Error('the base URL must name a host');
  // Not echoed: it may be a password.
  if (u.username || u.password)
    throw new Error(
      'the base URL must not carry a user name or password: store the provider key as a team secret (factoryd secrets set) instead',
    );
  if (u.search || u.hash || value.includes('?') || value.includes('#'))
    throw new Error(
      'the base URL must have no query (?…) or fragment (#…): the CLIs append their paths to it',
    );
  return u.href.replace(/\/+$/, '');
}

/**
 * The egress rule that admits a team's base URL, its host and port (its addresses still checked:
 * egress-policy.ts). The URL is one parseBaseUrl returned.
 */
export const baseUrlRule = (url: string): EgressRule => baseUrlDestination(url)!;

/**
 * Why a team may not use this base URL here, or undefined: its host is `localhost` or a loopback,
 * private, link-local or reserved address literal, and the operator trusts no such host and port
 * (`trusted`: HARNESS_EGRESS_TRUST's and the providers' base URLs, Config.harnessEgress.trusted).
 * A name that resolves to such an address is refused by the egress proxy when the CLI connects.
 */
export function untrustedInternalBaseUrl(
  url: string,
  trusted: ReadonlyArray<{ host: string; port: number }>,
): string | undefined {
  const { host, port } = baseUrlDestination(url)!;
  if (!isInternalHost(host) || trusted.some((t) => t.host === host && t.port === port)) return undefined;
  const where = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  return (
    `the base URL points at a loopback, private or link-local address (${where}), which a team's base URL may not reach; ` +
    `the operator can allow it by adding it to HARNESS_EGRESS_TRUST`
  );
}
