// An environment's repository in a run's workspace: a clone from the worker's repository cache (the
// team's mirror fetched — nothing new — then `clone --reference mirror --dissociate`, as a run
// does it: RepositoryCache.stage) against a fresh clone of the same repository from its server
// (`git clone git://…`, git daemon on loopback), the baseline, in the same run. The repository:
// 2,000 files of 8 KiB over 20 commits. Prints medians of 5 and the ratio; never fails on a time.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { RepositoryCache } from '../dist/environments/repository-cache.js';
import { GitRunner } from '../dist/git/git-runner.js';

const FILES = 2000;
const COMMITS = 20;
const RUNS = 5;

const root = mkdtempSync(join(tmpdir(), 'factoryd-bench-repo-'));
const repo = join(root, 'served', 'app');
mkdirSync(repo, { recursive: true });
const git = (cwd, ...args) =>
  execFileSync('git', ['-c', 'user.name=bench', '-c', 'user.email=b@b', ...args], { cwd, encoding: 'utf8' });
git(repo, 'init', '--quiet', '--initial-branch=main');
for (let c = 0; c < COMMITS; c++) {
  const touched = c === 0 ? FILES : FILES / 10;
  for (let i = 0; i < touched; i++) {
    const n = c === 0 ? i : (i * 7 + c) % FILES;
    mkdirSync(join(repo, `d${n % 50}`), { recursive: true });
    writeFileSync(join(repo, `d${n % 50}`, `f${n}.txt`), randomBytes(4096).toString('hex'));
  }
  git(repo, 'add', '-A');
  git(repo, 'commit', '--quiet', '-m', `commit ${c}`);
}
git(repo, 'gc', '--quiet');
const size = git(repo, 'count-objects', '-vH').match(/size-pack: (.*)/)?.[1] ?? '?';

const port = 20000 + Math.floor(Math.random() * 20000);
const daemon = spawn(
  'git',
  [
    'daemon',
    '--reuseaddr',
    '--export-all',
    '--listen=127.0.0.1',
    `--port=${port}`,
    `--base-path=${join(root, 'served')}`,
  ],
  { stdio: 'ignore' },
);
for (;;) {
  const up = await new Promise((resolve) => {
    const s = createConnection(port, '127.0.0.1', () => (s.end(), resolve(true)));
    s.on('error', () => resolve(false));
  });
  if (up) break;
  await new Promise((r) => setTimeout(r, 50));
}
const url = `git://127.0.0.1:${port}/app`;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const time = async (fn) => {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
};

// Its repository is served over git://: no local repository is checked (or allowed) here.
const cache = new RepositoryCache(join(root, 'cache'), new GitRunner({ gitTimeoutSeconds: 300 }), () =>
  Promise.reject(new Error('the bench clones no local repository')),
);
const repository = { url, path: 'app', branch: 'main' };
let n = 0;
const stage = () =>
  cache.stage({ id: 'bench-team', name: 'bench' }, [repository], {}, join(root, 'staging', String(n++)));
const cold = await time(stage); // the first run of the worker on this repository: its mirror is made
const fresh = [];
const cached = [];
for (let i = 0; i < RUNS; i++) {
  const dest = join(root, 'fresh', String(i));
  fresh.push(await time(async () => git(root, 'clone', '--quiet', '--branch', 'main', url, dest)));
  cached.push(await time(stage));
}
daemon.kill();
rmSync(root, { recursive: true, force: true });

const ms = (x) => `${x.toFixed(0)} ms`;
console.log(
  `repository: ${FILES} files, ${COMMITS} commits, packed ${size}, served by git daemon on loopback`,
);
console.log(`first run on this worker (mirror made, then cloned): ${ms(cold)}`);
console.log(`fresh clone from the server (baseline), median of ${RUNS}: ${ms(median(fresh))}`);
console.log(
  `clone from the cache (mirror fetched, nothing new; --reference --dissociate), median of ${RUNS}: ${ms(median(cached))}`,
);
console.log(`ratio cache / fresh: ${(median(cached) / median(fresh)).toFixed(2)}`);
