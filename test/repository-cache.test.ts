import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RepositoryCache } from '../src/environments/repository-cache.js';
import { GitRunner } from '../src/git/git-runner.js';
import { serveOverGit, TestRepo } from './support/git-repo.js';

/**
 * The worker's repository cache keeps a mirror per team and repository; one no run used for
 * REPOSITORY_CACHE_DAYS goes (docs/environments.md, "The repository cache"). Real repositories
 * served by git daemon; a mirror's age is its folder's time, set back as days passing would.
 */
const DAY_MS = 24 * 3600_000;
const HOUR_MS = 3600_000;
const team = { id: '00000000-0000-4000-8000-00000000000a', name: 'default' };
const refuseLocal = async (): Promise<string> => {
  throw new Error('no local repositories here');
};

let one: TestRepo;
let two: TestRepo;
let servers: Array<{ url: string; stop(): void }>;
const folders: string[] = [];
beforeAll(async () => {
  one = new TestRepo();
  one.commit({ 'one.txt': 'one\n' });
  two = new TestRepo();
  two.commit({ 'two.txt': 'two\n' });
  servers = [await serveOverGit(one), await serveOverGit(two)];
});
afterAll(() => {
  for (const s of servers ?? []) s.stop();
  one?.remove();
  two?.remove();
  for (const f of folders) rmSync(f, { recursive: true, force: true });
});

function cacheIn(keepDays: number): { cache: RepositoryCache; root: string; staging: () => string } {
  const dir = mkdtempSync(join(tmpdir(), 'factoryd-repo-cache-'));
  folders.push(dir);
  const root = join(dir, 'cache');
  const cache = new RepositoryCache(root, new GitRunner({ gitTimeoutSeconds: 60 }), refuseLocal, keepDays);
  let n = 0;
  return { cache, root, staging: () => join(dir, `staging-${n++}`) };
}

const repository = (i: number) => ({ url: servers[i]!.url, path: `r${i}` });
/** The team's mirror folders in the cache at `root`. */
const mirrors = (root: string) =>
  readdirSync(join(root, 'teams', team.id))
    .sort()
    .map((m) => join(root, 'teams', team.id, m));
const age = (path: string, days: number) => {
  const then = new Date(Date.now() - days * DAY_MS);
  utimesSync(path, then, then);
};

describe('the repository cache keeps what runs use', () => {
  it('removes a mirror no run used for REPOSITORY_CACHE_DAYS, and a cut-short clone; keeps one in use; a run needing the removed one fetches it again', async () => {
    const { cache, root, staging } = cacheIn(14);
    await cache.stage(team, [repository(0)], {}, staging());
    const [first] = mirrors(root);
    await cache.stage(team, [repository(1)], {}, staging());
    const second = mirrors(root).find((m) => m !== first);
    // Fifteen days without a run for the first; the second used a day ago; a crash left a clone half made.
    age(first!, 15);
    age(second!, 1);
    const leftover = `${second}.new-0badc0de`;
    mkdirSync(leftover);
    age(leftover, 15);

    expect(cache.pruneUnused(Date.now() + HOUR_MS)).toEqual([first, leftover].sort());
    expect(existsSync(second!)).toBe(true);

    // The next run that names it clones it afresh, and the mirror is back, dated now.
    const staged = await cache.stage(team, [repository(0)], {}, staging());
    expect(staged[0]!.commit).toBe(one.git('rev-parse', 'HEAD'));
    expect(existsSync(first!)).toBe(true);
    expect(cache.pruneUnused(Date.now() + 2 * HOUR_MS)).toEqual([]);
  });

  it('sweeps at most once an hour, and at the first staging after that', async () => {
    const { cache, root, staging } = cacheIn(14);
    await cache.stage(team, [repository(0)], {}, staging()); // the first staging sweeps (nothing yet)
    const [mirror] = mirrors(root);
    age(mirror!, 15);
    expect(cache.pruneUnused()).toEqual([]); // swept within the hour
    expect(existsSync(mirror!)).toBe(true);
    expect(cache.pruneUnused(Date.now() + HOUR_MS)).toEqual([mirror]);
  });

  it('never removes a mirror while a run fetches it', async () => {
    const { cache, root, staging } = cacheIn(14);
    await cache.stage(team, [repository(0)], {}, staging());
    const [mirror] = mirrors(root);
    age(mirror!, 15);
    // The staging below holds the mirror from its first step (before anything is awaited) to its end.
    const fetching = cache.stage(team, [repository(0)], {}, staging());
    expect(cache.pruneUnused(Date.now() + HOUR_MS)).toEqual([]);
    await fetching;
    expect(existsSync(mirror!)).toBe(true);
    // That fetch brought nothing new, and still counts as a use: the mirror is kept at the next sweep.
    expect(cache.pruneUnused(Date.now() + 2 * HOUR_MS)).toEqual([]);
  });

  it('keeps every mirror with REPOSITORY_CACHE_DAYS=0', async () => {
    const { cache, root, staging } = cacheIn(0);
    await cache.stage(team, [repository(0)], {}, staging());
    const [mirror] = mirrors(root);
    age(mirror!, 3650);
    expect(cache.pruneUnused(Date.now() + HOUR_MS)).toEqual([]);
    expect(existsSync(mirror!)).toBe(true);
  });
});
