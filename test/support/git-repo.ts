import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { eventually } from './eventually.js';

/** A real git repository in a temp folder, committed to as a person would. */
export class TestRepo {
  readonly dir: string;

  /** `under`: the folder to make it in (created if missing), for a test that needs a path of its own. */
  constructor(
    readonly branch = 'main',
    under = tmpdir(),
  ) {
    mkdirSync(under, { recursive: true });
    this.dir = mkdtempSync(join(under, 'factoryd-repo-'));
    this.git('init', '--quiet', `--initial-branch=${branch}`);
    this.git('config', 'user.email', 'test@example.com');
    this.git('config', 'user.name', 'Test');
    this.git('config', 'commit.gpgsign', 'false');
  }

  git(...args: string[]): string {
    return execFileSync('git', args, { cwd: this.dir, encoding: 'utf8' }).trim();
  }

  /** Writes (or with `null`, removes) files and commits them; returns the commit SHA. */
  commit(files: Record<string, string | null>, message = 'change'): string {
    for (const [path, content] of Object.entries(files)) {
      const full = join(this.dir, path);
      if (content === null) rmSync(full, { force: true });
      else {
        mkdirSync(dirname(full), { recursive: true });
        writeFileSync(full, content);
      }
    }
    this.git('add', '-A');
    this.git('commit', '--quiet', '--allow-empty', '-m', message);
    return this.git('rev-parse', 'HEAD');
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Serves a repository over git:// on loopback with a real `git daemon`: a remote URL of an allowed
 * transport (factoryd refuses `file://`), fetched the way a hosted repository is.
 */
export async function serveOverGit(repo: TestRepo): Promise<{ url: string; stop(): void }> {
  const port = await new Promise<number>((resolve, reject) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
    probe.on('error', reject);
  });
  const daemon = spawn(
    'git',
    [
      'daemon',
      '--reuseaddr',
      '--export-all',
      '--listen=127.0.0.1',
      `--port=${port}`,
      `--base-path=${dirname(repo.dir)}`,
    ],
    { stdio: 'ignore' },
  );
  await eventually(
    () =>
      new Promise<boolean>((resolve) => {
        const socket = createConnection(port, '127.0.0.1', () => (socket.end(), resolve(true)));
        socket.on('error', () => resolve(false));
      }),
    'git daemon listening',
  );
  return { url: `git://127.0.0.1:${port}/${basename(repo.dir)}`, stop: () => daemon.kill() };
}

/** A small valid factory: a foreman, a worker agent, a token webhook on `secret`. */
export function baseFactory(secret = 'hook-secret'): Record<string, string> {
  return {
    'factory.yaml':
      'schemaVersion: v1alpha1\nname: test-factory\ndescription: A test factory\nagentDefaults:\n  model: base-model\n  workerHost: warp\n',
    'agents/lead/agent.md':
      '---\nagentType: FOREMAN\ndescription: Leads\noverrides:\n  model: lead-model\n---\nYou lead the factory.\n',
    'agents/fixer/agent.md': '---\ndescription: Fixes bugs\n---\nYou fix bugs.\n',
    'webhooks/ci.yaml': `authMode: token\nsecretName: ${secret}\n`,
    'skills/triage/SKILL.md': '---\nname: triage\ndescription: Triage issues\n---\nHow to triage.\n',
  };
}

export function automation(uid: string, extra = ''): string {
  return `---\nagent: fixer\ntriggers:\n  - provider: webhook\n    event: received\n    filter:\n      webhook_ids: [${uid}]\n      payload:\n        action: [opened]\n${extra}---\nFix what the payload describes.\n`;
}
