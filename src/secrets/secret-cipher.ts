import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * AES-256-GCM for team secrets at rest. Stored form: version byte (1) | 12-byte IV | 16-byte tag |
 * ciphertext. The secret's id is bound in as associated data, so a value copied onto another secret
 * row does not decrypt.
 */
const FORMAT = 1;

export class SecretCipher {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error('secrets key must be 32 bytes');
  }

  encrypt(plaintext: string, boundTo: string): Buffer {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    cipher.setAAD(Buffer.from(boundTo));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return Buffer.concat([Buffer.from([FORMAT]), iv, cipher.getAuthTag(), body]);
  }

  decrypt(stored: Buffer, boundTo: string): string {
    if (stored[0] !== FORMAT) throw new Error('unknown secret format');
    const decipher = createDecipheriv('aes-256-gcm', this.key, stored.subarray(1, 13));
    decipher.setAAD(Buffer.from(boundTo));
    decipher.setAuthTag(stored.subarray(13, 29));
    return Buffer.concat([decipher.update(stored.subarray(29)), decipher.final()]).toString('utf8');
  }
}
