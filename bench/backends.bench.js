// bench/backends: a run's start on each backend against spawning the same command bare. "Start" is
// from asking for the harness to its first line on stdout (what a worker waits for before the run
// shows output), and "whole" until its last process is gone (a container is removed after that,
// off the run's path). The harness is Node.js printing one line, so the figure is the backend's own cost plus one Node start. Each
// backend runs ROUNDS times (BENCH_BACKENDS_ROUNDS, default 20) in turn with the bare baseline, so
// a shared machine's load moves them alike; medians and p90 printed, and each ratio to bare.
// bwrap runs where it works here; Docker where the Engine answers (as root), in an image made from
// this machine's files (test/support/local-image.js). Never fails on a time.
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadConfig } from '../dist/config/config.js';
import { PACKAGE_ROOT } from '../dist/common/paths.js';
import { HarnessProcess } from '../dist/workers/worker/harness-process.js';
import { chooseSandbox, harnessEnvironment } from '../dist/workers/launcher/sandbox.js';
import { dockerUnavailable, localImage } from '../test/support/local-image.js';

const ROUNDS = Number(process.env.BENCH_BACKENDS_ROUNDS ?? 20);
const COMMAND = `"${process.execPath}" -e "console.log('ready')"`;
const pct = (xs, p) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];

/** The baseline: the same command spawned bare (a shell, in a process group of its own). */
function bare() {
  return new Promise((resolve) => {
    const t0 = performance.now();
    let start;
    // The harnesses' environment, not this process's (NODE_EXTRA_CA_CERTS alone costs a Node start ~250 ms here).
    const child = spawn('/bin/sh', ['-c', COMMAND], {
      detached: true,
      env: harnessEnvironment({}, tmpdir(), []),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    child.stdin.end('{}\n');
    child.stdout.once('data', () => (start = performance.now() - t0));
    child.stderr.resume();
    child.on('close', () => resolve({ start, whole: performance.now() - t0 }));
  });
}

/** One harness through the worker's launcher, in `sandbox`. */
function launched(sandbox, root, i) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    let start;
    const cwd = join(root, `bench-${i}`);
    const harness = new HarnessProcess(
      {
        command: COMMAND,
        cwd,
        files: [],
        env: harnessEnvironment({}, cwd, []),
        sandbox,
        graceMs: 1000,
        stdin: '{}\n',
      },
      (stream) => {
        if (stream === 'stdout' && start === undefined) start = performance.now() - t0;
      },
    );
    void harness.finished.then((exit) => {
      if (exit.code !== 0) throw new Error(`the harness ended ${JSON.stringify(exit)}`);
      resolve({ start, whole: performance.now() - t0 });
    });
  });
}

async function main() {
  const root = mkdtempSync(join(tmpdir(), 'factoryd-bench-backends-'));
  chmodSync(root, 0o755); // as root, bwrap's harness user must pass through it to its workspaces
  const config = loadConfig({ ...process.env, DATA_DIR: join(root, 'data') });
  const settings = (docker) => ({
    requested: 'bwrap',
    harnessUser: config.harnessUser,
    harnessUids: config.harnessUids,
    dataDir: config.dataDir,
    packageRoot: PACKAGE_ROOT.replace(/\/$/, ''),
    docker,
  });
  const backends = [];
  try {
    backends.push({
      name: 'bwrap',
      sandbox: chooseSandbox(settings(), join(root, 'w-bwrap')).sandbox,
      root: join(root, 'w-bwrap'),
    });
  } catch (err) {
    console.log(`bwrap: skipped (${err.message})`);
  }
  const noDocker = dockerUnavailable();
  if (noDocker) console.log(`docker: skipped (${noDocker})`);
  else {
    const docker = { ...config.docker, image: localImage(), keepFailedSeconds: 0 };
    backends.push({
      name: 'docker',
      sandbox: chooseSandbox(settings(docker), join(root, 'w-docker')).sandbox,
      root: join(root, 'w-docker'),
    });
  }
  const results = { bare: [], ...Object.fromEntries(backends.map((b) => [b.name, []])) };
  await bare(); // warm-up: the first spawns pay for loading Node's binary
  for (const b of backends) await launched(b.sandbox, b.root, 'warm');
  for (let i = 0; i < ROUNDS; i++) {
    results.bare.push(await bare());
    for (const b of backends) results[b.name].push(await launched(b.sandbox, b.root, i));
  }
  const base = {
    start: pct(
      results.bare.map((r) => r.start),
      50,
    ),
    whole: pct(
      results.bare.map((r) => r.whole),
      50,
    ),
  };
  console.log(`${ROUNDS} starts each, one at a time; the harness: Node.js printing one line`);
  console.log(
    'backend   start p50   start p90   whole p50   ratio (start p50 / bare)   ratio (whole p50 / bare)',
  );
  for (const [name, rs] of Object.entries(results)) {
    const s50 = pct(
      rs.map((r) => r.start),
      50,
    );
    const s90 = pct(
      rs.map((r) => r.start),
      90,
    );
    const w50 = pct(
      rs.map((r) => r.whole),
      50,
    );
    console.log(
      `${name.padEnd(8)} ${s50.toFixed(1).padStart(8)} ms ${s90.toFixed(1).padStart(8)} ms ${w50.toFixed(1).padStart(8)} ms ` +
        `${(s50 / base.start).toFixed(2).padStart(20)}x ${(w50 / base.whole).toFixed(2).padStart(24)}x`,
    );
  }
  rmSync(root, { recursive: true, force: true });
  process.exit(0); // the launchers hold no work; do not wait on their channels
}

await main();
