import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SecretCipher } from './secret-cipher.js';

describe('SecretCipher', () => {
  const cipher = new SecretCipher(randomBytes(32));

  it('round-trips and never stores the plaintext', () => {
    const stored = cipher.encrypt('s3cr3t-value', 'secret-1');
    expect(stored.includes(Buffer.from('s3cr3t-value'))).toBe(false);
    expect(cipher.decrypt(stored, 'secret-1')).toBe('s3cr3t-value');
  });

  it('refuses a value moved to another secret, a tampered value, or another key', () => {
    const stored = cipher.encrypt('value', 'secret-1');
    expect(() => cipher.decrypt(stored, 'secret-2')).toThrow();
    const tampered = Buffer.from(stored);
    tampered[tampered.length - 1] ^= 1;
    expect(() => cipher.decrypt(tampered, 'secret-1')).toThrow();
    expect(() => new SecretCipher(randomBytes(32)).decrypt(stored, 'secret-1')).toThrow();
  });
});
