import type { KeyRecord } from './auth.repository.js';

/**
 * API keys verified recently, so an API request costs no database round trip of its own for its key:
 * a list request is one statement. Bounded in time and size:
 * - an entry lives `ttlMs` (API_KEY_CACHE_SECONDS, 10 s by default), so a revoked key (revoked by
 *   `factoryd api-keys revoke`, another process), or a change of its teams, is refused by every
 *   replica within that time;
 * - at most `maxEntries` keys; past that the oldest entry is dropped.
 * Keyed by the key's SHA-256 hash (never the key); only keys found live are kept, so an unknown key
 * is looked up every time and a new key works at once.
 */
export class VerifiedKeys {
  private readonly entries = new Map<string, { record: KeyRecord; expiresAt: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
    private readonly now: () => number = () => performance.now(),
  ) {}

  get(hash: Buffer): KeyRecord | undefined {
    if (this.ttlMs <= 0) return undefined;
    const id = hash.toString('base64');
    const entry = this.entries.get(id);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.now()) {
      this.entries.delete(id);
      return undefined;
    }
    return entry.record;
  }

  set(hash: Buffer, record: KeyRecord): void {
    if (this.ttlMs <= 0) return;
    const id = hash.toString('base64');
    // Re-inserted at the end: the Map's order is the order entries expire in.
    this.entries.delete(id);
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(id, { record, expiresAt: this.now() + this.ttlMs });
  }
}
