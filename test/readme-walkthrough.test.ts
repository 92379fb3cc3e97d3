import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fromRoot } from '../src/common/paths.js';
import { eventually } from './support/eventually.js';

/**
 * The README's walkthrough ("a webhook that starts a run"), taken from the README itself and run as
 * written (issue #19): a fresh copy of the checkout, `npm start` in one terminal on the embedded
 * PostgreSQL, and every other command in a second terminal that has no PORT, no DATABASE_URL and no
 * API URL — only what the README exports. What a person fills in by hand (the webhook's UID and
 * secret, an entry id, a run id) is read from the output of the command before, as they would.
 *
 * Both terminals have a HOME of their own whose git knows no name for the user, as on a fresh
 * machine (`user.useConfigOnly`: git may not make one up from the host either), so the README's
 * `git commit` is tried as a newcomer would run it.
 *
 * Two things differ from a person's machine, each said where it happens: `npm ci` is not run again
 * (the copy shares this checkout's installed node_modules and takes a copy of its built dist, its files
 * keep their times so that `npm start`'s own build step finds dist up to date, as `npm test` has just
 * built it), and the service listens on a
 * free port rather than 8080, so the README's `127.0.0.1:8080` is read as that port.
 */

const README = readFileSync(fromRoot('README.md'), 'utf8');
/** Built from schemas/ and not tracked by git: a fresh clone makes it in its first build. */
const CONTRACT = join('src', 'contract', 'generated.ts');

/** The fenced ```sh blocks of the README's walkthrough section, in order. */
function walkthroughBlocks(): string[] {
  const start = README.indexOf('## Walkthrough');
  if (start < 0) throw new Error('README.md has no "## Walkthrough" section');
  const end = README.indexOf('\n## ', start + 1);
  const section = README.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** A command line without its trailing `# comment` (the README explains each step there). */
const withoutComment = (line: string) => line.replace(/\s+#.*$/, '');

function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolvePort(port));
    });
  });
}

const hasCurl = (() => {
  try {
    execFileSync('curl', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

describe.skipIf(!hasCurl)(
  `the README walkthrough, as written${hasCurl ? '' : ' (skipped: curl is not installed)'}`,
  () => {
    let dir: string;
    let server: ChildProcess;
    let serverOut = '';
    let port: number;
    /** The newcomer's HOME; their terminals and `npm start` read no git config of this machine's (GIT_CONFIG_NOSYSTEM). */
    let home: string;
    const personal = () => ({ PATH: process.env.PATH!, HOME: home, GIT_CONFIG_NOSYSTEM: '1' });
    /** What the second terminal has exported so far (a fresh shell per block reads it back). */
    const stateFile = () => join(dir, '.walkthrough-env.sh');

    /** One command or block in the second terminal: bash in the copy, the env it exported before. */
    async function terminal(script: string): Promise<{ code: number | null; out: string }> {
      const readmePortFixed = script.replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`);
      const child = spawn(
        'bash',
        [
          '-c',
          `set -e; [ -f "${stateFile()}" ] && . "${stateFile()}"; ${readmePortFixed}\nexport -p > "${stateFile()}"`,
        ],
        // A new terminal: PATH and HOME, nothing of the service (no PORT, DATABASE_URL, API URL or key).
        {
          cwd: dir,
          env: personal(),
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let out = '';
      child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
      const code = await new Promise<number | null>((done) => child.on('close', done));
      return { code, out };
    }

    async function ok(script: string): Promise<string> {
      const r = await terminal(script);
      expect(r.code, `${script}\n${r.out}`).toBe(0);
      return r.out;
    }

    beforeAll(async () => {
      // A fresh clone: the files git tracks (as they are in this working tree), in a new folder.
      dir = mkdtempSync(join(tmpdir(), 'factoryd-readme-'));
      const tracked = execFileSync('git', ['ls-files', '-z'], { cwd: fromRoot() }).toString().split('\0');
      for (const file of tracked.filter((f) => f && existsSync(fromRoot(f)))) {
        mkdirSync(dirname(join(dir, file)), { recursive: true });
        copyFileSync(fromRoot(file), join(dir, file));
        // As old as the original: the shared dist was built from these sources, so npm start's
        // bin/build-if-stale.js finds nothing to build (a copy's new times would rebuild it).
        const { atime, mtime } = statSync(fromRoot(file));
        utimesSync(join(dir, file), atime, mtime);
      }
      // What `npm ci && npm run build` leave in it, taken from this checkout instead of made again:
      // node_modules shared; the generated contract and dist copied with their times, so nothing in
      // the copy is newer than its build. A build there writes only the copy's own dist (a shared one
      // was rewritten under the other test files' processes while they imported it).
      symlinkSync(fromRoot('node_modules'), join(dir, 'node_modules'));
      cpSync(fromRoot(CONTRACT), join(dir, CONTRACT), { preserveTimestamps: true });
      cpSync(fromRoot('dist'), join(dir, 'dist'), { recursive: true, preserveTimestamps: true });
      port = await freePort();
      home = mkdtempSync(join(tmpdir(), 'factoryd-readme-home-'));
      writeFileSync(join(home, '.gitconfig'), '[user]\n\tuseConfigOnly = true\n');
    }, 120_000);

    afterAll(async () => {
      if (server && server.exitCode === null) {
        // Ctrl-C in the first terminal: SIGINT to its foreground process group (npm, sh, node).
        process.kill(-server.pid!, 'SIGINT');
        await eventually(
          () => server.exitCode !== null || server.signalCode !== null,
          'npm start to stop on Ctrl-C',
          {
            timeoutMs: 60_000,
          },
        ).catch(() => process.kill(-server.pid!, 'SIGKILL'));
      }
      if (!dir) return;
      // As root, the embedded cluster lives under /var/lib/factoryd/pg, linked from ./var/pg.
      const pg = join(dir, 'var', 'pg');
      try {
        const target = readlinkSync(pg);
        rmSync(resolve(dirname(pg), target), { recursive: true, force: true });
      } catch {
        /* not a link: it is under dir */
      }
      rmSync(dir, { recursive: true, force: true });
      if (home) rmSync(home, { recursive: true, force: true });
    });

    it('has the blocks the walkthrough is made of', () => {
      const blocks = walkthroughBlocks();
      expect(blocks.length).toBe(4);
      expect(withoutComment(blocks[0]!.trim())).toBe('npm ci && npm start');
    });

    it('first terminal: npm start serves the example factory on the embedded PostgreSQL', async () => {
      // `npm ci` was run for this checkout; `npm start` finds dist up to date (npm test built it).
      server = spawn('npm', ['start'], {
        cwd: dir,
        env: { ...personal(), PORT: String(port) },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true, // a process group of its own, as a terminal's foreground job
      });
      server.stdout!.on('data', (d: Buffer) => (serverOut += d.toString()));
      server.stderr!.on('data', (d: Buffer) => (serverOut += d.toString()));
      await eventually(
        () => {
          if (server.exitCode !== null) throw new Error(`npm start exited: ${serverOut.slice(-2000)}`);
          return (
            existsSync(join(dir, 'var', 'first-start-credentials.txt')) &&
            existsSync(join(dir, 'var', 'service.json'))
          );
        },
        'npm start to be up with its credentials file and var/service.json',
        { timeoutMs: 120_000, intervalMs: 100 },
      );
      expect(serverOut).toContain('first-start-credentials.txt');
      // The copy's dist was up to date: its build step built nothing (bin/build-if-stale.js says so).
      expect(serverOut).not.toMatch(/^building /m);
    }, 130_000);

    let hook = '';
    let secret = '';

    it('second terminal: a managed factory and a webhook, its UID, URL and secret printed once', async () => {
      const lines = walkthroughBlocks()[1]!.trimEnd().split('\n');
      // The last line stands for the one the CLI prints last, which the reader pastes as it is.
      const pasted = lines.pop()!;
      expect(pasted).toMatch(/^export HOOK=…\s+SECRET=…$/);
      const out = await ok(lines.join('\n'));
      hook = /^Created webhook ci-alerts \((\w{22})\)\.$/m.exec(out)?.[1] ?? '';
      secret = /^ {2}([A-Za-z0-9]{40})$/m.exec(out)?.[1] ?? '';
      expect(hook && secret, out).toBeTruthy();
      expect(out).toContain(`/webhooks/w/${hook}`);
      expect(out).toMatch(/^Factory {5}ops \(\w{22}\)$/m);
      const printed = out.trimEnd().split('\n').at(-1)!.trim();
      expect(printed).toBe(`export HOOK=${hook} SECRET=${secret}`);
      await ok(printed);
    });

    it('second terminal: the automation committed to the factory repository and applied', async () => {
      const out = await ok(walkthroughBlocks()[2]!);
      expect(out).toMatch(/Triage failed CI jobs/);
      const file = readFileSync(
        join(dir, 'var', 'factories', 'teams', 'default', 'ops', 'automations', 'triage', 'automation.md'),
        'utf8',
      );
      expect(file).toContain(`webhook_ids: [${hook}]`);
    });

    it('second terminal: the delivery is Accepted, starts a run that SUCCEEDS, and Test filter explains', async () => {
      const lines = walkthroughBlocks()[3]!.trim().split('\n');
      // The curl line goes on over two lines (a trailing backslash): one command.
      const commands: string[] = [];
      for (const line of lines) {
        const previous = commands.at(-1);
        if (previous?.endsWith('\\')) commands[commands.length - 1] = `${previous}\n${line}`;
        else commands.push(line);
      }
      let entry = '';
      let run = '';
      const seen: string[] = [];
      for (const written of commands) {
        const command = withoutComment(written).replace('ENTRY_ID', entry).replace('RUN_ID', run);
        const out = await ok(command);
        seen.push(`$ ${command}\n${out}`);
        if (/webhooks deliveries \$HOOK$/.test(command)) {
          expect(out).toMatch(/Accepted/);
          entry = /Accepted.*\s(\S+)\s*$/m.exec(out)?.[1] ?? '';
          expect(entry, out).toBeTruthy();
        } else if (/webhooks deliveries \$HOOK \S+$/.test(command)) {
          expect(out).toContain('"level": "error"');
          run = /Runs started:[\s\S]*?([0-9a-f]{8}-[0-9a-f-]{27})/.exec(out)?.[1] ?? '';
          expect(run, out).toBeTruthy();
        } else if (/runs watch/.test(command)) {
          expect(out).toMatch(/SUCCEEDED/);
        } else if (/test-filter .*--automation triage/.test(command)) {
          expect(out).toMatch(/^Would trigger$/m);
        } else if (/test-filter .*--filter/.test(command)) {
          expect(out).toMatch(/^Would not trigger$/m);
        }
      }
      // Every step the README names was taken, in its order.
      expect(seen.length).toBe(commands.length);
      expect(commands.some((c) => c.includes('ENTRY_ID')) && commands.some((c) => c.includes('RUN_ID'))).toBe(
        true,
      );
    }, 120_000);
  },
);
