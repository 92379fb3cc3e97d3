import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config/config.js';

/**
 * SECRETS_KEY when set; otherwise a key generated once under DATA_DIR (mode 0600) and reused. Several
 * replicas must share SECRETS_KEY: each would otherwise generate its own.
 */
export function loadSecretsKey(config: Config): Buffer {
  if (config.secretsKey) return config.secretsKey;
  const file = join(config.dataDir, 'secrets.key');
  if (existsSync(file)) {
    const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'base64');
    if (key.length !== 32) throw new Error(`${file} does not hold a 32-byte base64 key`);
    return key;
  }
  mkdirSync(config.dataDir, { recursive: true });
  const key = randomBytes(32);
  writeFileSync(file, key.toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
  return key;
}
