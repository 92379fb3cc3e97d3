// The reconciler on a generated factory of 20 webhooks, 50 agents and 500 automations in a temp git
// repository: offline validate, the first full apply, a one-file change, a no-op poll, and commit-to-
// live through the ref watch. Baseline, same run: reading the same files at that commit with git
// alone (ls-tree + cat-file --batch). Targets: full apply ≤ 1 s, one-file change ≤ 200 ms,
// no-op ≤ 20 ms, commit-to-live ≤ 2 s. Prints figures; never fails on a time.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { AuthRepository } from '../dist/auth/auth.repository.js';
import { AuthService } from '../dist/auth/auth.service.js';
import { bootstrapDefaultTeam } from '../dist/auth/bootstrap.js';
import { readFolder } from '../dist/cli/commands/factories.commands.js';
import { SchemaRegistry } from '../dist/common/schema-validator.js';
import { loadConfig } from '../dist/config/config.js';
import { loadDefinition } from '../dist/definitions/validate-definition.js';
import { DefinitionStore } from '../dist/reconciler/definition-store.js';
import { ReconcileScheduler } from '../dist/reconciler/reconcile-scheduler.js';
import { Reconciler } from '../dist/reconciler/reconciler.js';
import { SecretsService } from '../dist/secrets/secrets.service.js';
import { startService } from '../dist/service.js';

const WEBHOOKS = 20;
const AGENTS = 50;
const AUTOMATIONS = 500;

const root = mkdtempSync(join(tmpdir(), 'factoryd-bench-'));
chmodSync(root, 0o755); // as root, the embedded PostgreSQL runs as `postgres`, which must reach it
const repo = join(root, 'repo');
mkdirSync(repo);
const git = (...args) =>
  execFileSync(
    'git',
    ['-c', 'user.name=bench', '-c', 'user.email=b@b', '-c', 'commit.gpgsign=false', ...args],
    {
      cwd: repo,
      encoding: 'utf8',
    },
  ).trim();
const write = (files) => {
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(repo, path)), { recursive: true });
    writeFileSync(join(repo, path), content);
  }
};
const commit = (message) => {
  git('add', '-A');
  git('commit', '--quiet', '-m', message);
  return git('rev-parse', 'HEAD');
};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const time = async (fn) => {
  const t0 = performance.now();
  const r = await fn();
  return [performance.now() - t0, r];
};
const ms = (x) => `${x.toFixed(1)} ms`;

const agentFile = (i) =>
  `---\ndescription: Agent ${i}\n${i === 0 ? 'agentType: FOREMAN\n' : ''}overrides:\n  model: model-${i % 3}\n---\nYou are agent ${i}. Do the work you are given.\n`;
const automationFile = (i, uid, note = '') =>
  `---\nagent: agent-${String(i % AGENTS).padStart(2, '0')}\ntriggers:\n  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: [${uid}]\n      payload:\n        action: [opened, reopened]\n        sender: { type: { not_in: [Bot] } }\n        issue: { number: { exists: true } }\n---\nHandle event ${i}.${note}\n`;

const config = loadConfig({
  ...process.env,
  PORT: '0',
  LOG_LEVEL: 'silent',
  DATA_DIR: join(root, 'var'),
  FACTORY_POLL_SECONDS: '3600',
  // The bench's repository is a local folder under `root` (docs/security.md, "Factory registration").
  FACTORY_REPO_ROOTS: root,
});
const service = await startService(config);
try {
  const authRepo = new AuthRepository(service.db);
  await bootstrapDefaultTeam(authRepo, new AuthService(authRepo));
  const team = await authRepo.findTeamByName('default');
  const app = service.app;
  await app.get(ReconcileScheduler).firstPoll;
  await app.get(SecretsService).set(team.id, 'bench-secret', 'bench-value');
  const reconciler = app.get(Reconciler);
  const store = app.get(DefinitionStore);

  // Commit 1: the webhooks (and the foreman), which get their UIDs when they apply.
  git('init', '--quiet', '--initial-branch=main');
  write({ 'factory.yaml': 'schemaVersion: v1alpha1\nname: bench\nagentDefaults:\n  model: base\n' });
  write({ 'agents/agent-00/agent.md': agentFile(0) });
  for (let i = 0; i < WEBHOOKS; i++)
    write({ [`webhooks/hook-${i}.yaml`]: 'authMode: token\nsecretName: bench-secret\n' });
  commit('webhooks');
  const factory = await store.register({ teamId: team.id, name: 'bench', repoUrl: repo, branch: 'main' });
  const [seedMs, seed] = await time(() => reconciler.request(factory.id));
  if (seed.result !== 'applied') throw new Error(`seed did not apply: ${JSON.stringify(seed.errors)}`);
  const uids = (
    await service.db.query(`SELECT uid FROM webhooks WHERE factory_id = $1 ORDER BY name`, [factory.id])
  ).map((r) => r.uid);

  // Commit 2: the whole factory.
  for (let i = 0; i < AGENTS; i++)
    write({ [`agents/agent-${String(i).padStart(2, '0')}/agent.md`]: agentFile(i) });
  for (let i = 0; i < AUTOMATIONS; i++)
    write({ [`automations/auto-${i}/automation.md`]: automationFile(i, uids[i % WEBHOOKS]) });
  write({ 'skills/triage/SKILL.md': '---\nname: triage\ndescription: t\n---\nTriage.\n' });
  const full = commit('full factory');
  const files = 1 + AGENTS + AUTOMATIONS + WEBHOOKS + 1;

  // Offline validate of the folder (read + parse + schema + semantic checks).
  const registry = new SchemaRegistry();
  const validateRuns = [];
  for (let i = 0; i < 5; i++) {
    const [t, r] = await time(async () => loadDefinition(readFolder(repo).tree, registry));
    if (r.errors.length) throw new Error(`validate: ${JSON.stringify(r.errors.slice(0, 3))}`);
    validateRuns.push(t);
  }

  const [fullMs, fullOut] = await time(() => reconciler.request(factory.id));
  if (fullOut.result !== 'applied')
    throw new Error(`full apply: ${JSON.stringify(fullOut.errors.slice(0, 3))}`);

  // Baseline: the same files at that commit with git alone.
  const baselineRuns = [];
  for (let i = 0; i < 5; i++) {
    const t0 = performance.now();
    const listing = execFileSync('git', ['ls-tree', '-r', '-z', full], {
      cwd: repo,
      encoding: 'utf8',
      maxBuffer: 1 << 26,
    });
    const shas = listing
      .split('\0')
      .filter(Boolean)
      .map((l) => l.split('\t')[0].split(' ')[2]);
    const r = spawnSync('git', ['cat-file', '--batch'], {
      cwd: repo,
      input: shas.join('\n') + '\n',
      maxBuffer: 1 << 26,
    });
    if (r.status !== 0) throw new Error('cat-file failed');
    baselineRuns.push(performance.now() - t0);
  }
  const baseline = median(baselineRuns);

  // One-file change.
  const changeRuns = [];
  for (let i = 0; i < 5; i++) {
    write({ 'automations/auto-7/automation.md': automationFile(7, uids[7], ` Change ${i}.`) });
    commit(`change ${i}`);
    const [t, r] = await time(() => reconciler.request(factory.id));
    if (r.result !== 'applied') throw new Error(`change: ${r.result}`);
    changeRuns.push(t);
  }

  // No-op poll (same head).
  const noopRuns = [];
  for (let i = 0; i < 20; i++) {
    const [t, r] = await time(() => reconciler.request(factory.id));
    if (r.result !== 'noop') throw new Error(`no-op: ${r.result}`);
    noopRuns.push(t);
  }

  // Commit to live through the watch.
  await app.get(ReconcileScheduler).pollAll(); // starts the watch; ready when it resolves
  const liveRuns = [];
  for (let i = 0; i < 5; i++) {
    write({ 'automations/auto-9/automation.md': automationFile(9, uids[9], ` Live ${i}.`) });
    const t0 = performance.now();
    const sha = commit(`live ${i}`);
    for (;;) {
      const [row] = await service.db.query(`SELECT last_applied_revision FROM factories WHERE id = $1`, [
        factory.id,
      ]);
      if (row.last_applied_revision === sha) break;
      if (performance.now() - t0 > 10_000) throw new Error('commit did not go live within 10 s');
      await new Promise((r) => setTimeout(r, 5));
    }
    liveRuns.push(performance.now() - t0);
  }

  const rows = [
    ['offline validate (read folder + parse + check)', median(validateRuns), null],
    ['first full apply (49 agents, 500 automations, 1 skill new)', fullMs, 1000],
    ['one-file change apply', median(changeRuns), 200],
    ['no-op poll (same head)', median(noopRuns), 20],
    ['commit-to-live through the watch', median(liveRuns), 2000],
  ];
  console.log(
    `factory: ${WEBHOOKS} webhooks, ${AGENTS} agents, ${AUTOMATIONS} automations (${files} files); seed apply of the webhooks: ${ms(seedMs)}`,
  );
  console.log(
    `baseline: git ls-tree -r + cat-file --batch of the ${files + 0} files at the commit: ${ms(baseline)} (median of 5)`,
  );
  for (const [name, v, target] of rows) {
    console.log(
      `${name.padEnd(60)} ${ms(v).padStart(10)}   ${(v / baseline).toFixed(2).padStart(6)}× baseline${target ? `   target ≤ ${target} ms: ${v <= target ? 'met' : 'MISSED'}` : ''}`,
    );
  }
  console.log('(medians: validate 5 runs, change 5, no-op 20, commit-to-live 5; full apply is one run)');
} finally {
  await service.stop();
  rmSync(root, { recursive: true, force: true });
}
