import { createHash } from 'node:crypto';
import { base62 } from '../common/ids.js';

export const SCOPES = ['runs:read', 'runs:write', 'factory:manage'] as const;
export type Scope = (typeof SCOPES)[number];

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
