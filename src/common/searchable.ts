import { dirname, resolve } from 'node:path';
import { statSync } from 'node:fs';

/**
 * The first folder above `path` that other users cannot pass through (no search bit for others), if
 * any: a process running as another user (the embedded PostgreSQL's `postgres`, a harness's uid) cannot
 * open anything below it by an absolute path, whatever the modes further down say.
 */
export function unsearchableAbove(path: string): string | undefined {
  for (let d = dirname(resolve(path)); ; d = dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) return d;
    if (d === dirname(d)) return undefined;
  }
}
