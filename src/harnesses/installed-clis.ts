/**
 * Which agent CLIs this machine has, and where `factoryd harnesses install` puts them. A CLI is found
 * at its `*_COMMAND` variable (a path), else in the install folder, else on PATH; its version is what
 * `<cli> --version` prints. Node built-ins only.
 */
import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { BUILT_IN_HARNESSES, HARNESSES, type BuiltInHarness } from './harness-types.js';
// Detection, not an adapter (adapters run from a copy of this folder, so they import Node's modules only).
import { cliCommand } from '../common/cli-command.js';
import { fromRoot } from '../common/paths.js';
import { unsearchableAbove } from '../common/searchable.js';
import { ROOT_STATE_DIR } from '../common/shared-runtime.js';

export interface InstalledCli {
  type: BuiltInHarness;
  /** The executable. */
  path: string;
  /** What `--version` printed (its first line); undefined when it did not answer. */
  version?: string;
  /** Why it cannot be used, when it cannot (it did not start). */
  problem?: string;
}

/**
 * The folder harness CLIs are installed into (one sub-folder per type): HARNESSES_DIR, else
 * /var/lib/factoryd/harnesses for a root service (a harness's uid reaches it), else
 * `$DATA_DIR/harnesses` (bound read-only into the bwrap sandbox, where DATA_DIR is hidden).
 */
export function harnessesDir(env: NodeJS.ProcessEnv, dataDir: string): string {
  if (env.HARNESSES_DIR) return env.HARNESSES_DIR;
  return process.getuid?.() === 0 ? join(ROOT_STATE_DIR, 'harnesses') : join(dataDir, 'harnesses');
}

/**
 * Where a checkout keeps the agent CLIs its tests drive (CI installs them there first): `.cache/harnesses`
 * in it, except as root in a checkout a harness's uid cannot pass through (under /root, in a
 * `mktemp -d`), where the runs could not start a CLI (EACCES): then beside a root service's own CLIs.
 */
export function checkoutHarnessesDir(): string {
  return process.getuid?.() === 0 && unsearchableAbove(fromRoot('package.json'))
    ? join(ROOT_STATE_DIR, 'test-harnesses')
    : fromRoot('.cache', 'harnesses');
}

const executable = (path: string) => {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/** Where a CLI is, or undefined. */
export function findCli(
  type: BuiltInHarness,
  env: NodeJS.ProcessEnv,
  installDir: string,
): string | undefined {
  const info = HARNESSES[type];
  const named = env[info.commandVariable];
  if (named) return named;
  const installed = join(installDir, type, 'node_modules', '.bin', info.bin);
  if (executable(installed)) return installed;
  for (const dir of (env.PATH ?? '').split(delimiter))
    if (dir && executable(join(dir, info.bin))) return join(dir, info.bin);
  return undefined;
}

/** The CLIs found here, each asked its version (in parallel, 15 s at most). */
export async function detectClis(env: NodeJS.ProcessEnv, installDir: string): Promise<InstalledCli[]> {
  const found = BUILT_IN_HARNESSES.flatMap((type) => {
    const path = findCli(type, env, installDir);
    return path ? [{ type, path }] : [];
  });
  return Promise.all(
    found.map(
      ({ type, path }) =>
        new Promise<InstalledCli>((done) =>
          execFile(
            path,
            ['--version'],
            // An npm-installed CLI (Codex, Gemini CLI) starts with `#!/usr/bin/env node`: this Node first.
            {
              timeout: 15_000,
              env: {
                PATH: [dirname(process.execPath), env.PATH || '/usr/bin:/bin'].join(delimiter),
                HOME: env.HOME ?? '/tmp',
              },
            },
            (err, stdout) => {
              const version = stdout.trim().split('\n')[0]?.trim();
              if (err && !version)
                done({ type, path, problem: `\`${path} --version\` failed: ${err.message.split('\n')[0]}` });
              else done({ type, path, version });
            },
          ),
        ),
    ),
  );
}

/** For the start banner: what was found and how to enable the others. */
export function describeClis(clis: InstalledCli[]): string {
  const usable = clis.filter((c) => !c.problem);
  const found = usable.map((c) => `${c.type} (${c.version ?? 'version unknown'}, ${c.path})`);
  const missing = BUILT_IN_HARNESSES.filter((t) => !usable.some((c) => c.type === t));
  return [
    found.length ? `real agent harnesses: ${found.join(', ')}` : 'real agent harnesses: none found',
    ...clis.filter((c) => c.problem).map((c) => `${c.type} unusable: ${c.problem}`),
    ...(missing.length
      ? [
          `to enable ${missing.join(', ')}: \`${cliCommand(`harnesses install ${missing[0]}`)}\` (or put it on PATH, or set ${missing.map((t) => HARNESSES[t].commandVariable).join('/')}), then store the provider key as a team secret (README, "Run a real agent")`,
        ]
      : []),
  ].join('\n');
}
