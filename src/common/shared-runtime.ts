/**
 * Files that a process of another user executes or reads — the embedded PostgreSQL's binaries (run as
 * `postgres`), the harnesses' programs (run as a harness's uid) — where that user can reach them.
 *
 * As root, a checkout often lies where no other user can pass (`/root` is 0700, and so is every
 * `mktemp -d`). We leave the checkout's own modes alone and instead copy what the other user needs,
 * once per content, to a folder of its own under ROOT_STATE_DIR: a later start with the same files
 * finds the copy by its stamp and copies nothing.
 *
 * Plain Node built-ins only: the launcher imports this file.
 */
import { createHash } from 'node:crypto';
import type { Stats } from 'node:fs';
import {
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { unsearchableAbove } from './searchable.js';

/** As root, where factoryd keeps what other users (postgres, harness uids) must reach. */
export const ROOT_STATE_DIR = '/var/lib/factoryd';

/** Copies of files other users run, one folder per name and content stamp. */
export const SHARED_RUNTIME_DIR = join(ROOT_STATE_DIR, 'runtime');

/** The marker written last into a finished copy: a copy without it was cut short and is made again. */
const COMPLETE = '.complete';

/** Whether a process of another user can read every file of `path` (a file or a folder) by its path. */
function reachableByOthers(path: string): boolean {
  if (unsearchableAbove(path)) return false;
  return everyEntry(path, (_, s) => {
    const needs = s.isDirectory() ? 0o005 : 0o004;
    return s.isSymbolicLink() || (s.mode & needs) === needs;
  });
}

/**
 * `source` (a folder or a file) as other users can reach it: itself when they can, else a copy under
 * SHARED_RUNTIME_DIR named `<name>-<stamp>` (readable by all, executables kept executable), made once
 * per content. Only root can make such a copy; for anyone else `source` is returned as it is.
 */
export function reachableCopy(source: string, name: string): string {
  if (process.getuid?.() !== 0 || reachableByOthers(source)) return source;
  const target = join(SHARED_RUNTIME_DIR, `${name}-${stamp(source)}`);
  const copy = statSync(source).isDirectory() ? target : join(target, baseName(source));
  if (existsSync(join(target, COMPLETE))) return copy;
  mkdirSync(SHARED_RUNTIME_DIR, { recursive: true, mode: 0o755 });
  chmodSync(ROOT_STATE_DIR, 0o755);
  chmodSync(SHARED_RUNTIME_DIR, 0o755);
  // Made beside its final name, then renamed into place: two starts at once each make their own,
  // and the first rename wins; a start killed halfway leaves a folder no one uses.
  const partial = `${target}.partial-${process.pid}-${Date.now()}`;
  rmSync(partial, { recursive: true, force: true });
  if (copy === target)
    cpSync(source, partial, { recursive: true, dereference: false, verbatimSymlinks: true });
  else {
    mkdirSync(partial);
    cpSync(source, join(partial, baseName(source)));
  }
  openToOthers(partial);
  writeFileSync(join(partial, COMPLETE), `${source}\n`, { mode: 0o644 });
  try {
    rmSync(target, { recursive: true, force: true }); // an unfinished copy of an earlier start
    renameSync(partial, target);
  } catch {
    rmSync(partial, { recursive: true, force: true });
    if (!existsSync(join(target, COMPLETE))) throw new Error(`could not copy ${source} to ${target}`);
  }
  return copy;
}

/** A stamp of the tree's content as its files' names, sizes, modes and modification times give it. */
function stamp(source: string): string {
  // Not the source's own path: two checkouts of one version (a CI clone each run) share one copy.
  const hash = createHash('sha256');
  everyEntry(source, (p, s) => {
    hash.update(`${relative(source, p)}\0${s.size}\0${s.mode}\0${s.mtimeMs}\n`);
    return true;
  });
  return hash.digest('hex').slice(0, 16);
}

/** Every folder o+rx, every file o+r, and o+x where its owner may execute it. */
function openToOthers(root: string): void {
  everyEntry(root, (p, s) => {
    if (s.isSymbolicLink()) return true;
    const extra = s.isDirectory() ? 0o755 : s.mode & 0o100 ? 0o755 : 0o644;
    chmodSync(p, (s.mode & 0o777) | extra);
    return true;
  });
}

/** Walks `root` (links are not followed), stopping at the first entry `visit` refuses. */
function everyEntry(root: string, visit: (path: string, st: Stats) => boolean): boolean {
  const st = lstatSync(root);
  if (!visit(root, st)) return false;
  if (!st.isDirectory()) return true;
  for (const entry of readdirSync(root).sort()) if (!everyEntry(join(root, entry), visit)) return false;
  return true;
}

function baseName(path: string): string {
  return resolve(path).split('/').pop()!;
}
