import { describe, expect, it } from 'vitest';
import type { KeyRecord } from './auth.repository.js';
import { VerifiedKeys } from './verified-keys.js';

const record = (keyId: string): KeyRecord => ({
  keyId,
  scopes: ['runs:read'],
  principal: { id: 'p', uid: 'u', type: 'service_account', displayName: 'k' },
  teams: [],
  workerHost: null,
});
const hash = (n: number) => Buffer.from([n]);

describe('VerifiedKeys', () => {
  it('keeps a key for its time to live, then asks again', () => {
    let now = 0;
    const keys = new VerifiedKeys(10_000, 100, () => now);
    keys.set(hash(1), record('a'));
    now = 9_999;
    expect(keys.get(hash(1))?.keyId).toBe('a');
    now = 10_000;
    expect(keys.get(hash(1))).toBeUndefined();
  });

  it('holds at most its bound, dropping the oldest entry', () => {
    const keys = new VerifiedKeys(10_000, 2, () => 0);
    keys.set(hash(1), record('a'));
    keys.set(hash(2), record('b'));
    keys.set(hash(3), record('c'));
    expect(keys.get(hash(1))).toBeUndefined();
    expect(keys.get(hash(2))?.keyId).toBe('b');
    expect(keys.get(hash(3))?.keyId).toBe('c');
  });

  it('keeps nothing when its time to live is 0', () => {
    const keys = new VerifiedKeys(0, 2, () => 0);
    keys.set(hash(1), record('a'));
    expect(keys.get(hash(1))).toBeUndefined();
  });
});
