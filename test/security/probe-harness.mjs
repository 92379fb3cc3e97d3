// A harness that attacks what it runs in (test/security/harness.test.ts): it reads the prompt, tries
// each reach in turn, and reports what it got as `PROBE {…}` messages of the harness protocol.
//   prompt "VICTIM":          says its workspace, then waits for `cancel` (a run with an attachment)
//   prompt "ATTACK {params}": params `service_pid`, `worker_pid`, `data_dir`, `victim_workspace`,
//                             `victim_repo` (each optional)
// Plain Node, no dependencies: it must run wherever a harness runs.
import { existsSync, readFileSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';

const emit = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);

/** What an attempt got: `got` (a short excerpt) if it worked, else the error code. */
function attempt(fn) {
  try {
    const got = fn();
    return { ok: true, got: String(got).slice(0, 80) };
  } catch (err) {
    return { ok: false, error: err.code ?? err.message };
  }
}

function attack(p) {
  const found = {};
  found.env = Object.keys(process.env).sort();
  if (p.service_pid) {
    found.service_environ = attempt(() => readFileSync(`/proc/${p.service_pid}/environ`, 'latin1'));
    found.service_in_proc = attempt(() => {
      if (!existsSync(`/proc/${p.service_pid}`)) throw new Error('not in /proc');
      return 'visible';
    });
  }
  // Every process's environment and cwd it can see: another run's workspace, the service's secrets.
  const pids = readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  found.pids_seen = pids.length;
  found.other_environ = attempt(() => {
    const hits = pids.filter((pid) => {
      try {
        return /DATABASE_URL=|SECRETS_KEY=|FACTORYD_API_KEY=/.test(
          readFileSync(`/proc/${pid}/environ`, 'latin1'),
        );
      } catch {
        return false;
      }
    });
    if (!hits.length) throw new Error('none readable');
    return hits.join(',');
  });
  if (p.worker_pid) {
    found.worker_environ = attempt(() => readFileSync(`/proc/${p.worker_pid}/environ`, 'latin1'));
    found.worker_cmdline = attempt(() => readFileSync(`/proc/${p.worker_pid}/cmdline`, 'latin1'));
  }
  if (p.data_dir) {
    found.list_data_dir = attempt(() => readdirSync(p.data_dir).join(','));
    found.secrets_key = attempt(() => readFileSync(join(p.data_dir, 'secrets.key'), 'utf8'));
    found.pg_cluster = attempt(() => readFileSync(join(p.data_dir, 'pg', 'cluster.json'), 'utf8'));
    found.pg_data = attempt(() => readdirSync(join(p.data_dir, 'pg', 'data')).join(','));
  }
  if (p.victim_workspace) {
    found.victim_attachment = attempt(() => readFileSync(join(p.victim_workspace, 'secret.txt'), 'utf8'));
    found.list_worker_folder = attempt(() => readdirSync(dirname(p.victim_workspace)).join(','));
    found.list_workspace_root = attempt(() => readdirSync(dirname(dirname(p.victim_workspace))).join(','));
    found.victim_by_proc_cwd = attempt(() => {
      for (const pid of pids) {
        try {
          const cwd = readlinkSync(`/proc/${pid}/cwd`);
          if (cwd !== process.cwd()) return readFileSync(join(cwd, 'secret.txt'), 'utf8');
        } catch {
          /* next */
        }
      }
      throw new Error('no readable secret.txt behind any /proc/<pid>/cwd');
    });
  }
  if (p.victim_repo) {
    found.repo_write = attempt(() => writeFileSync(join(p.victim_repo, 'pwned.txt'), 'pwned'));
    found.repo_hook = attempt(() =>
      writeFileSync(join(p.victim_repo, '.git', 'hooks', 'post-commit'), '#!/bin/sh\necho pwned\n'),
    );
  }
  return found;
}

let first = true;
createInterface({ input: process.stdin }).on('line', (line) => {
  const msg = JSON.parse(line);
  if (msg.type === 'cancel') process.exit(130);
  if (!first) return;
  first = false;
  const prompt = String(msg.prompt);
  if (prompt.startsWith('VICTIM')) {
    emit({ type: 'message', text: `workspace ${process.cwd()}` });
    return; // waits for its cancel
  }
  const params = JSON.parse(prompt.replace(/^ATTACK\s*/, '') || '{}');
  emit({ type: 'message', text: `PROBE ${JSON.stringify(attack(params))}` });
  emit({ type: 'result', status: 'succeeded', message: 'probed' });
  process.exit(0);
});
