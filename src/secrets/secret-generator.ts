import { randomBytes } from 'node:crypto';
import { base62 } from '../common/ids.js';

export const SECRET_KINDS = ['token', 'url-safe', 'whsec'] as const;
export type SecretKind = (typeof SECRET_KINDS)[number];

/** URL-safe characters (RFC 3986 unreserved): what a `url_token` secret may contain. */
export const URL_SAFE = /^[A-Za-z0-9._~-]+$/;

/**
 * New secret values: `token` for bearer tokens, `url-safe` for URL tokens (both ~238 bits of base62),
 * `whsec` for Standard Webhooks (`whsec_` + base64 of 32 random bytes).
 */
export function generateSecret(kind: SecretKind): string {
  switch (kind) {
    case 'token':
    case 'url-safe':
      return base62(40);
    case 'whsec':
      return `whsec_${randomBytes(32).toString('base64')}`;
  }
}
