import { createHash } from 'node:crypto';
import { base62 } from '../common/ids.js';
import { selfHostedHostProblem } from '../common/worker-host.js';
import { cliCommand } from '../common/cli-command.js';

export const SCOPES = ['runs:read', 'runs:write', 'factory:manage', 'workers'] as const;
export type Scope = (typeof SCOPES)[number];

/**
 * The worker API's scope. A key with it is a machine's credential, bound to one worker_host, and has
 * no other scope: a worker reads prompts, attachments and skills of the runs it claims and reports
 * their ends, so its key must not also start, read or cancel runs, and must not serve another host.
 */
export const WORKER_SCOPE = 'workers' satisfies Scope;
/** The scopes a person's or a service's key may have (the admin key has them all). */
export const CALLER_SCOPES = SCOPES.filter((s) => s !== WORKER_SCOPE);

/** The command that issues a worker key: what a refused worker is told to run. */
export function workerKeyCommand(team: string, workerHost: string): string {
  return cliCommand(`api-keys create --team ${team} --scopes workers --worker-host ${workerHost}`);
}

/**
 * API keys are 40 random base62 characters behind a `fdk_` prefix (~238 bits). Only their SHA-256 is
 * stored: with that much entropy a slow hash adds nothing, and lookups stay one indexed read.
 */
export interface NewApiKey {
  key: string;
  /** Shown in listings so a person can tell keys apart; not enough to use the key. */
  prefix: string;
  hash: Buffer;
}

export function generateApiKey(): NewApiKey {
  const key = `fdk_${base62(40)}`;
  return { key, prefix: key.slice(0, 10), hash: hashApiKey(key) };
}

export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

export function parseScopes(list: string): Scope[] {
  const scopes = list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
  if (unknown.length || !scopes.length) {
    throw new Error(`unknown scope ${unknown.join(', ') || '(none given)'}; scopes are ${SCOPES.join(', ')}`);
  }
  return [...new Set(scopes)] as Scope[];
}

/**
 * Checks a key's scopes against its worker host: `workers` goes alone and with exactly one host (not
 * the service-hosted one), and only a worker key has a host. Returns the reason it is refused.
 */
export function workerKeyProblem(
  scopes: readonly Scope[],
  workerHost: string | undefined,
): string | undefined {
  if (!scopes.includes(WORKER_SCOPE))
    return workerHost === undefined ? undefined : '--worker-host is only for a key with --scopes workers';
  if (scopes.length > 1)
    return 'the workers scope goes alone: a worker key must not also start, read or cancel runs (make a second key for that)';
  if (workerHost === undefined) return 'a workers key needs --worker-host ID (the one host it may serve)';
  return selfHostedHostProblem(workerHost, '--worker-host');
}
