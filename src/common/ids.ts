import { randomBytes, randomUUID } from 'node:crypto';

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** A random `[A-Za-z0-9]` string, unbiased (rejection sampling). */
export function base62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

/** The 22-character public UIDs of teams, factories and webhooks (~131 bits). */
export function newUid(): string {
  return base62(22);
}

export function newUuid(): string {
  return randomUUID();
}

export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
