import type { DefinitionFile } from './definition-file.js';

/**
 * Parsed definition files by blob id and path, so an unchanged file is neither read nor parsed again.
 * Bounded by bytes (each file's `source.weight`), not by count: one process serves every team, and a
 * count bound let a few commits of large files take the heap. The least recently used go first.
 */
export class ParsedFileCache {
  /** Insertion order is recency: a hit moves its entry to the end. */
  private readonly files = new Map<string, DefinitionFile>();
  private held = 0;

  constructor(readonly maxBytes: number) {}

  get(key: string): DefinitionFile | undefined {
    const file = this.files.get(key);
    if (file) {
      this.files.delete(key);
      this.files.set(key, file);
    }
    return file;
  }

  set(key: string, file: DefinitionFile): void {
    const old = this.files.get(key);
    if (old) {
      this.files.delete(key);
      this.held -= old.source.weight;
    }
    // A file bigger than the whole budget is used for this reconcile and not kept.
    if (file.source.weight > this.maxBytes) return;
    this.files.set(key, file);
    this.held += file.source.weight;
    for (const [oldest, f] of this.files) {
      if (this.held <= this.maxBytes) break;
      this.files.delete(oldest);
      this.held -= f.source.weight;
    }
  }

  /** The bytes the cached files hold (by their weight). */
  get bytes(): number {
    return this.held;
  }

  get size(): number {
    return this.files.size;
  }
}
