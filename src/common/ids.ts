import { createHash, randomBytes, randomUUID } from 'node:crypto';

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

/** A UUID that `name` always gives (SHA-1, version 5 layout): a stable id for something stored without one. */
export function uuidFrom(name: string): string {
  const b = createHash('sha1').update(name).digest().subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x50;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
