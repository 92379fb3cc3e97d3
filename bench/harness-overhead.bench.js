// bench/harness-overhead: what a run costs beyond the agent CLI itself. The same one-turn task
// (the model answers at once) against the same Anthropic stub on loopback, ROUNDS times each way,
// alternating: Claude Code started by hand (`claude -p … --output-format stream-json`, as the
// adapter starts it), and a run through factoryd (API create → QUEUED → claimed by a service-hosted
// slot → the built-in adapter in the harness sandbox → SUCCEEDED). Prints both medians, the ratio
// (target ≤ 1.2×) and claim-to-first-model-request (target ≤ 300 ms). Needs the CLI: HARNESSES_DIR
// (default .cache/harnesses, `factoryd harnesses install claude`), CLAUDE_COMMAND or PATH.
// Uses DATABASE_URL when set, else a throwaway embedded PostgreSQL.
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pg_ from 'pg';
import ts from 'typescript';
import { fromRoot } from '../dist/common/paths.js';
import { loadConfig } from '../dist/config/config.js';
import { EmbeddedPostgres } from '../dist/database/embedded-postgres.js';
import { findCli } from '../dist/harnesses/installed-clis.js';
import { AuthRepository } from '../dist/auth/auth.repository.js';
import { AuthService } from '../dist/auth/auth.service.js';
import { bootstrapDefaultTeam } from '../dist/auth/bootstrap.js';
import { RunsRepository } from '../dist/runs/runs.repository.js';
import { SecretsService } from '../dist/secrets/secrets.service.js';
import { startService } from '../dist/service.js';

const { Client } = pg_;
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** The tests' Anthropic stub (test/support/model-stubs/anthropic.ts), transpiled: one stub, not two. */
async function loadStub(dir) {
  const source = readFileSync(fromRoot('test/support/model-stubs/anthropic.ts'), 'utf8');
  const { outputText } = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  });
  const file = join(dir, 'anthropic-stub.mjs');
  writeFileSync(file, outputText);
  return import(file);
}

/** Claude Code by hand, as the adapter starts it: spawn to exit. */
function byHand(cli, stub, cwd) {
  const started = performance.now();
  const wall = Date.now();
  const seen = stub.requests.length;
  return new Promise((resolve, reject) => {
    const child = spawn(
      cli,
      [
        '-p',
        'Say done.',
        '--output-format',
        'stream-json',
        '--verbose',
        '--permission-mode',
        'bypassPermissions',
      ],
      {
        cwd,
        env: {
          PATH: process.env.PATH,
          HOME: cwd,
          ANTHROPIC_BASE_URL: stub.url,
          ANTHROPIC_API_KEY: 'sk-ant-bench',
          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
          DISABLE_AUTOUPDATER: '1',
          IS_SANDBOX: '1',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    child.stdout.resume();
    child.stderr.resume();
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0
        ? resolve({
            total: performance.now() - started,
            toModel: stub.requests.slice(seen).find((q) => q.path === '/v1/messages').at - wall,
          })
        : reject(new Error(`claude exited ${code}`)),
    );
  });
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'factoryd-bench-'));
  chmodSync(dir, 0o755); // as root the embedded server runs as `postgres`, which must reach it
  const harnessesDir = process.env.HARNESSES_DIR ?? fromRoot('.cache', 'harnesses');
  const cli = findCli('claude', process.env, harnessesDir);
  if (!cli) {
    console.log(
      `skipped: no claude CLI (run: HARNESSES_DIR=${harnessesDir} npx factoryd harnesses install claude)`,
    );
    return;
  }
  process.env.HARNESSES_DIR = harnessesDir;
  const { startAnthropicStub } = await loadStub(dir);
  const stub = await startAnthropicStub({ text: 'done' });
  process.env.ANTHROPIC_BASE_URL = stub.url;
  let pg;
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    pg = new EmbeddedPostgres({ dir: join(dir, 'pg'), durable: false });
    adminUrl = await pg.start();
  }
  try {
    await measure(adminUrl, dir, cli, stub);
  } finally {
    await stub.close();
    await pg?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function measure(adminUrl, dir, cli, stub) {
  const dbName = `factoryd_bench_harness_${process.pid}`;
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  try {
    const dbUrl = new URL(adminUrl);
    dbUrl.pathname = `/${dbName}`;
    const config = loadConfig({
      DATABASE_URL: dbUrl.toString(),
      PORT: '0',
      LOG_LEVEL: 'silent',
      DATA_DIR: join(dir, 'data'),
      WORKER_CONCURRENCY: '1',
      HARNESS_SANDBOX: process.env.HARNESS_SANDBOX ?? '',
      // The operator's base URL: the one the run's egress proxy trusts (a loopback stub included).
      ANTHROPIC_BASE_URL: stub.url,
    });
    const service = await startService(config);
    try {
      const authRepo = new AuthRepository(service.db);
      await bootstrapDefaultTeam(authRepo, new AuthService(authRepo));
      const team = await authRepo.findTeamByName('default');
      await service.app.get(SecretsService).set(team.id, 'anthropic', 'sk-ant-bench');
      const runs = service.app.get(RunsRepository);
      const byHandDir = join(dir, 'by-hand');
      mkdirSync(byHandDir);
      const one = async (i) => {
        const seen = stub.requests.length;
        const started = performance.now();
        const id = await runs.create(
          {
            teamId: team.id,
            title: `bench ${i}`,
            prompt: 'Say done.',
            source: 'API',
            creatorId: null,
            agentConfig: { harness: { type: 'claude', auth_secret_name: 'anthropic' } },
          },
          new Date(),
        );
        runs.queued();
        for (;;) {
          const [r] = await service.db.query(
            `SELECT state, claimed_at, status_message FROM runs WHERE id = $1`,
            [id],
          );
          if (['SUCCEEDED', 'FAILED', 'ERROR'].includes(r.state)) {
            if (r.state !== 'SUCCEEDED')
              throw new Error(`run ${r.state}: ${JSON.stringify(r.status_message)}`);
            const first = stub.requests.slice(seen).find((q) => q.path === '/v1/messages' && q.at);
            return {
              total: performance.now() - started,
              claimToModel: first ? first.at - r.claimed_at.getTime() : NaN,
            };
          }
          await sleep(5);
        }
      };
      // Warm-up: one of each (the CLI's first start reads its files from disk).
      await byHand(cli, stub, byHandDir);
      await one(0);
      const hand = [];
      const handToModel = [];
      const service_ = [];
      const claimToModel = [];
      for (let i = 1; i <= ROUNDS; i++) {
        const b = await byHand(cli, stub, byHandDir);
        hand.push(b.total);
        handToModel.push(b.toModel);
        const r = await one(i);
        service_.push(r.total);
        claimToModel.push(r.claimToModel);
      }
      const h = median(hand);
      const s = median(service_);
      console.log(
        `Claude Code by hand:     median ${h.toFixed(0)} ms (${hand.map((x) => x.toFixed(0)).join(', ')})`,
      );
      console.log(
        `through factoryd:        median ${s.toFixed(0)} ms (${service_.map((x) => x.toFixed(0)).join(', ')})`,
      );
      console.log(`ratio: ${(s / h).toFixed(2)}x (target ≤ 1.2x)`);
      console.log(
        `by hand, spawn → first model request: median ${median(handToModel).toFixed(0)} ms (the CLI's own start)`,
      );
      console.log(
        `claim → first model request: median ${median(claimToModel).toFixed(0)} ms (${claimToModel.map((x) => x.toFixed(0)).join(', ')}; target ≤ 300 ms)`,
      );
    } finally {
      await service.stop();
    }
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
  }
}

await main();
