import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fromRoot } from '../src/common/paths.js';
import { HarnessProcess } from '../src/workers/worker/harness-process.js';
import type { HarnessExit, WorkspaceFile } from '../src/workers/launcher/launcher.js';
import { chooseSandbox, type HarnessSandbox } from '../src/workers/launcher/sandbox.js';
import { eventually } from './support/eventually.js';
import { uniqueSleep } from './support/sleeps.js';

// The launcher as the worker uses it: a real launcher process, real harness processes, real folders.
const root = mkdtempSync(join(tmpdir(), 'factoryd-launcher-'));
// A run's folder is emptied and renamed to a spare after its end is reported: removing `root` before
// the launcher is done with it finds a folder come back into it.
afterAll(async () => {
  await eventually(
    () => !readdirSync(root).some((e) => e.startsWith('.retired-')),
    'the launcher done with its folders',
  );
  rmSync(root, { recursive: true, force: true });
});

/** Runs `command` in the workspace `name` under `root`; its stdout lines and its exit. */
async function harness(
  name: string,
  command: string,
  files: WorkspaceFile[] = [],
): Promise<{ out: string[]; exit: HarnessExit }> {
  const out: string[] = [];
  const h = start(name, command, out, { mode: 'none' }, files);
  return { out, exit: await h.finished };
}

function start(
  name: string,
  command: string,
  out: string[],
  sandbox: HarnessSandbox,
  files: WorkspaceFile[] = [],
): HarnessProcess {
  return new HarnessProcess(
    {
      command,
      cwd: join(root, name),
      files,
      env: { PATH: process.env.PATH! },
      sandbox,
      graceMs: 1000,
      stdin: '',
    },
    (stream, line) => stream === 'stdout' && out.push(line),
  );
}

/** What the harness sees of its workspace: inode, mode, and every entry. */
const LOOK = `stat -c '%i %a' . && find . -mindepth 1 | sort`;

/** The launcher keeps an emptied workspace folder as a spare once it is empty again (it is named `.spare-…` only then). */
async function spareKept(): Promise<void> {
  const spares = () => readdirSync(root).filter((e) => e.startsWith('.spare-'));
  await eventually(() => {
    if (spares().length === 1 && readdirSync(join(root, spares()[0]!)).length === 0) return true;
    throw new Error(`no empty spare in ${readdirSync(root).join(', ')}`);
  }, 'an empty spare');
}

describe('harness workspaces', () => {
  it('gives each run a fresh workspace, also when the folder is the one an earlier run had', async () => {
    const first = await harness(
      'run-1',
      `${LOOK} && echo secret > left.txt && mkdir -p deep/er && echo x > deep/er/file`,
      [{ path: 'event-payload.json', data: Buffer.from('{"a":1}').toString('base64'), encoding: 'base64' }],
    );
    expect(first.exit).toEqual({ code: 0, signal: null });
    expect(first.out.slice(1)).toEqual(['./event-payload.json']);
    // Gone under its name as soon as the run is done.
    expect(readdirSync(root)).not.toContain('run-1');
    await spareKept();

    const second = await harness('run-2', LOOK);
    const [inode1, mode1] = first.out[0]!.split(' ');
    const [inode2, mode2] = second.out[0]!.split(' ');
    expect(inode2).toBe(inode1); // the same folder, renamed into place…
    expect(mode2).toBe(mode1);
    expect(second.out.slice(1)).toEqual([]); // …with nothing of the first run in it
  });

  it('does not reuse a workspace whose mode the harness changed', async () => {
    await harness('run-3', 'chmod 755 .');
    const after = await harness('run-4', LOOK);
    expect(after.out[0]!.split(' ')[1]).toBe('700');
    expect(after.out.slice(1)).toEqual([]);
  });

  it('starts afresh in a workspace left over from an earlier try of the same execution', async () => {
    mkdirSync(join(root, 'run-5', 'old'), { recursive: true });
    const run = await harness('run-5', LOOK);
    expect(run.out.slice(1)).toEqual([]);
  });
});

describe('a harness in bwrap', () => {
  const choice = () =>
    chooseSandbox(
      {
        harnessUser: { uid: 65534, gid: 65534 },
        harnessUids: { first: 1900000, last: 1900999 },
        dataDir: join(root, 'data'),
        packageRoot: fromRoot(),
      },
      root,
    );
  const inBwrap = (() => {
    try {
      return choice().sandbox.mode === 'bwrap';
    } catch {
      return false;
    }
  })();

  it.skipIf(!inBwrap)('gets its grace on a stop: SIGTERM reaches the harness, not bwrap', async () => {
    const out: string[] = [];
    const h = start(
      'grace',
      `trap 'sleep 0.3; echo graceful; exit 0' TERM; echo ready; ${uniqueSleep(100).processArgs} & wait`,
      out,
      choice().sandbox,
    );
    await eventually(() => out.includes('ready'), 'the harness to start');
    const exit = await h.stop();
    expect(out).toContain('graceful');
    expect(exit).toEqual({ code: 0, signal: null });
  });

  it.skipIf(!inBwrap)('takes what the harness started with setsid with it', async () => {
    const sleep = uniqueSleep(300).processArgs;
    const out: string[] = [];
    const exit = await start(
      'escape-2',
      `setsid ${sleep} > /dev/null 2>&1 & echo started`,
      out,
      choice().sandbox,
    ).finished;
    expect(exit.code).toBe(0);
    expect(out).toEqual(['started']);
    const running = () =>
      readdirSync('/proc')
        .filter((e) => /^\d+$/.test(e))
        .some((p) => {
          try {
            return readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ') === sleep;
          } catch {
            return false;
          }
        });
    await eventually(() => !running(), `no \`${sleep}\` left`);
  });
});
