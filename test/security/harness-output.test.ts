import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fromRoot } from '../../src/common/paths.js';
import { eventually } from '../support/eventually.js';
import { runIn, startTestService, type TestService } from '../support/service.js';
import { twoTeamsNote, twoTeamsRefused } from '../support/sandbox-check.js';

// Issue #32, items 5 and 6: what a harness prints, played by an attacker (or an agent gone wrong).
// A run's transcript budget is 256 KiB or 2,000 events here.
const BUDGET = { bytes: 256 * 1024, events: 2000 };
let t: TestService;
const dataDir = mkdtempSync(join(tmpdir(), 'factoryd-output-test-'));
const children: ChildProcess[] = [];
beforeAll(async () => {
  t = await startTestService({
    WORKER_CONCURRENCY: '1',
    WORKER_LEASE_SECONDS: '3',
    RUN_TRANSCRIPT_MAX_BYTES: String(BUDGET.bytes),
    RUN_TRANSCRIPT_MAX_EVENTS: String(BUDGET.events),
  });
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await t?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

/** The run's events as stored, oldest first. */
const storedEvents = (runId: string) =>
  t.service.db.query<{ type: string; role: string | null; kind: string | null; body: any }>(
    `SELECT type, role, kind, body FROM run_events WHERE run_id = $1 ORDER BY id`,
    [runId],
  );

const isNote = (e: { role: string | null; body: any }) =>
  e.role === 'system' && /passed its transcript budget/.test(e.body.text);

/**
 * What the harness's output stored: every event but the opening prompt, the user's follow-ups and
 * the note, each as the compact JSON of its body (what the budget counts; an artifact's content is
 * stored apart and counted with its event).
 */
async function outputStored(runId: string): Promise<{ bytes: number; events: number; notes: number }> {
  const events = await storedEvents(runId);
  const output = events.filter((e) => !(e.type === 'message' && e.role === 'user') && !isNote(e));
  return {
    bytes: output.reduce((sum, e) => sum + Buffer.byteLength(JSON.stringify(e.body)), 0),
    events: output.length,
    notes: events.filter(isNote).length,
  };
}

async function create(key: string, body: Record<string, unknown>): Promise<string> {
  const res = await t.call('POST', '/api/v1/agent/runs', body, key);
  expect(res.status).toBe(200);
  return res.body.run_id;
}

/** A /proc/<pid>/<file> field as a number (kB for memory, bytes for io). */
const procField = (pid: number, file: string, field: string): number =>
  Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(readFileSync(`/proc/${pid}/${file}`, 'utf8'))![1]);

describe("a harness that prints far more than its run's transcript budget", () => {
  it.skipIf(twoTeamsRefused)(
    `is held back by its pipe: the worker and its launcher stay small, the run stores at most its budget with one note, and another team is served meanwhile${twoTeamsNote}`,
    async () => {
      // A self-hosted worker process of the team `default` (its memory measured on its own), whose
      // harness floods stdout with `yes` until a follow-up arrives, then ends with its result.
      const host = 'flood-box';
      const worker = spawn(
        process.execPath,
        [
          fromRoot('dist/cli/main.js'),
          'worker',
          '--worker-host',
          host,
          '--api',
          t.api,
          '--api-key',
          await t.workerKey(host),
        ],
        {
          env: {
            ...process.env,
            LOG_LEVEL: 'silent',
            TMPDIR: dataDir,
            HARNESS_COMMAND:
              `read -r prompt; yes 'flood flood flood flood flood flood flood flood flood flood flood flood' & y=$!; ` +
              `read -r more; kill $y; wait $y; echo '{"type":"result","status":"succeeded","message":"flooded"}'`,
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      children.push(worker);
      let said = '';
      worker.stdout!.on('data', (d) => (said += d));
      worker.stderr!.on('data', (d) => (said += d));
      await eventually(() => said.includes('factoryd worker'), 'the worker to start');
      const idleRssKb = procField(worker.pid!, 'status', 'VmRSS');

      const flood = await create(t.adminKey, { prompt: 'Flood', config: { worker_host: host } });
      await runIn(t, flood, ['INPROGRESS']);
      const launcher = await eventually(() => {
        const kids = readFileSync(`/proc/${worker.pid}/task/${worker.pid}/children`, 'utf8').split(' ');
        return kids
          .map(Number)
          .find((p) => p > 0 && /launcher\.js/.test(readFileSync(`/proc/${p}/cmdline`, 'utf8')));
      }, "the worker's harness launcher");

      // The budget is reached, and noted once, while the harness goes on printing.
      await eventually(async () => (await outputStored(flood)).notes === 1, 'the budget note').catch(
        async (err) => {
          throw new Error(
            `${err.message}; stored ${JSON.stringify(await outputStored(flood))}; worker said: ${said}`,
          );
        },
      );

      // Another team's run is served meanwhile (the service-hosted slot).
      const other = await t.newTeam('team-quiet');
      const quick = await create(other.key, { prompt: 'A quick job' });
      expect((await runIn(t, quick, ['SUCCEEDED', 'FAILED', 'ERROR'], other.key)).state).toBe('SUCCEEDED');

      // 200 MB went through the launcher's pipes (a thousand budgets): the harness was not stopped.
      const FLOOD_BYTES = 200 * 1024 * 1024;
      await eventually(() => procField(launcher, 'io', 'rchar') > FLOOD_BYTES, '200 MB of output read', {
        timeoutMs: 120_000,
        intervalMs: 250,
      });
      const workerPeakKb = procField(worker.pid!, 'status', 'VmHWM');
      const launcherPeakKb = procField(launcher, 'status', 'VmHWM');

      expect(
        (await t.call('POST', `/api/v1/agent/runs/${flood}/followups`, { message: 'enough' })).status,
      ).toBe(200);
      const ended = await runIn(t, flood, ['SUCCEEDED', 'FAILED', 'ERROR']);
      expect(ended.state).toBe('SUCCEEDED');
      expect(ended.status_message.message).toBe('flooded');

      const stored = await outputStored(flood);
      expect(stored.bytes).toBeLessThanOrEqual(BUDGET.bytes);
      expect(stored.bytes).toBeGreaterThan(BUDGET.bytes * 0.9);
      expect(stored.notes).toBe(1);
      const events = await storedEvents(flood);
      // The note is the last of the harness's events; after it only the user's follow-up.
      expect(events.slice(-2).map((e) => (isNote(e) ? 'note' : e.body.text))).toEqual(['note', 'enough']);

      // Whatever the harness printed, each process stays small: without the back-pressure the launcher
      // held what the worker had not taken yet (252 MiB at its peak here, and growing with the flood).
      const workerGrowthMb = (workerPeakKb - idleRssKb) / 1024;
      const launcherPeakMb = launcherPeakKb / 1024;
      process.stdout.write(
        `flood: worker idle ${(idleRssKb / 1024).toFixed(0)} MiB, peak +${workerGrowthMb.toFixed(0)} MiB; launcher peak ${launcherPeakMb.toFixed(0)} MiB\n`,
      );
      expect(workerGrowthMb).toBeLessThan(64);
      expect(launcherPeakMb).toBeLessThan(128);
      worker.kill('SIGTERM');
    },
    240_000,
  );
});

describe("the service counts a run's budget itself (a self-hosted worker may lie)", () => {
  it('stores at most the budget, in bytes and in events, from reports sent all at once, and notes it once', async () => {
    const host = 'liar-box';
    const key = await t.workerKey(host);
    const as = { worker_id: 'liar-1', worker_host: host };
    const report = (id: string, events: unknown[], more: Record<string, unknown> = {}) =>
      t.call(
        'POST',
        `/api/v1/agent/workers/runs/${id}/events`,
        { ...as, execution: 1, events, ...more },
        key,
      );
    const claimOne = async () => {
      const id = await create(t.adminKey, { prompt: 'Lie', config: { worker_host: host } });
      const claimed = await t.call('POST', '/api/v1/agent/workers/claim', as, key);
      expect(claimed.body.runs.map((r: { run_id: string }) => r.run_id)).toEqual([id]);
      expect(claimed.body.runs[0].transcript_budget).toEqual(BUDGET);
      expect((await report(id, [], { started_ms_ago: 0 })).status).toBe(200);
      return id;
    };

    // Bytes: 24 reports of 50 lines of 2,000 characters (2.4 MB), all at once.
    const big = await claimOne();
    const line = (i: number) => ({ type: 'transcript', stream: 'stdout', text: `${i} ${'x'.repeat(2000)}` });
    const sent = await Promise.all(
      Array.from({ length: 24 }, (_, r) =>
        report(
          big,
          Array.from({ length: 50 }, (_, i) => line(r * 50 + i)),
        ),
      ),
    );
    expect(sent.map((s) => s.status)).toEqual(Array(24).fill(200));
    const bytes = await outputStored(big);
    expect(bytes.bytes).toBeLessThanOrEqual(BUDGET.bytes);
    expect(bytes.bytes).toBeGreaterThan(BUDGET.bytes - 2100);
    expect(bytes.notes).toBe(1);

    // Events: 30 reports of 100 tiny messages, all at once.
    const many = await claimOne();
    const tiny = Array.from({ length: 100 }, (_, i) => ({
      type: 'message',
      role: 'assistant',
      text: `m${i}`,
    }));
    await Promise.all(Array.from({ length: 30 }, () => report(many, tiny)));
    const counted = await outputStored(many);
    expect(counted.events).toBe(BUDGET.events);
    expect(counted.notes).toBe(1);

    // A report past the budget still changes the run's state: BLOCKED is not lost with its text.
    expect((await report(many, [{ type: 'status', state: 'BLOCKED', message: 'Which one?' }])).status).toBe(
      200,
    );
    const blocked = await runIn(t, many, ['BLOCKED']);
    expect(blocked.status_message.message).toBe('Which one?');
    expect((await outputStored(many)).events).toBe(BUDGET.events);
  });
});

describe('a harness that prints NUL and lone surrogates (an agent printing a binary file)', () => {
  it.skipIf(twoTeamsRefused)(
    `ends SUCCEEDED with every message, action, artifact, status and result stored, each such character as U+FFFD${twoTeamsNote}`,
    async () => {
      const team = await t.newTeam('team-binary');
      const p = (json: string) => `printf '%s\\n' '${json}'`;
      await t.authRepo.setHarnessCommand(
        team.team.id,
        [
          'read -r prompt',
          p('{"type":"message","text":"nul:\\u0000 lone:\\ud800 pair:\\ud83d\\ude00 end"}'),
          p(
            '{"type":"action","kind":"run_command","input":{"command":"cat bin\\u0000ary","k\\u0000ey":["\\udc00"]}}',
          ),
          p(
            '{"type":"artifact","artifact_type":"PLAN","title":"plan\\u0000title","content":"step\\u0000one \\ud800"}',
          ),
          p(
            '{"type":"artifact","artifact_type":"FILE","filepath":"bin.dat","data":"AAEC/w==","description":"raw \\udfff"}',
          ),
          p(
            '{"type":"artifact","artifact_type":"EXTERNAL_REFERENCE","reference_type":"issue","url":"https://example.com/1","metadata":{"n\\u0000":"\\ud800"}}',
          ),
          `printf 'raw\\000byte on stdout\\n'`,
          `printf 'raw\\000byte on stderr\\n' >&2`,
          p('{"type":"status","state":"BLOCKED","message":"which\\u0000one \\udfff?"}'),
          'read -r answer',
          p('{"type":"result","status":"succeeded","message":"done\\u0000 \\ud800"}'),
        ].join('; '),
      );
      const id = await create(team.key, { prompt: 'Print a binary file' });
      const blocked = await runIn(t, id, ['BLOCKED'], team.key);
      expect(blocked.status_message.message).toBe('which\ufffdone \ufffd?');
      expect(
        (await t.call('POST', `/api/v1/agent/runs/${id}/followups`, { message: 'go on' }, team.key)).status,
      ).toBe(200);
      const run = await runIn(t, id, ['SUCCEEDED', 'FAILED', 'ERROR'], team.key);
      expect(run.state).toBe('SUCCEEDED');
      expect(run.status_message.message).toBe('done\ufffd \ufffd');

      const events = await storedEvents(id);
      const texts = events.filter((e) => e.type === 'message').map((e) => e.body.text);
      expect(texts).toContain('nul:\ufffd lone:\ufffd pair:😀 end');
      expect(events.find((e) => e.kind === 'run_command')?.body.input).toEqual({
        command: 'cat bin\ufffdary',
        'k\ufffdey': ['\ufffd'],
      });
      const transcript = events.filter((e) => e.type === 'transcript').map((e) => e.body.text);
      expect(transcript).toEqual(
        expect.arrayContaining(['raw\ufffdbyte on stdout', 'raw\ufffdbyte on stderr']),
      );

      const byType = Object.fromEntries(run.artifacts.map((a: any) => [a.artifact_type, a]));
      expect(byType.PLAN.data.title).toBe('plan\ufffdtitle');
      expect(byType.FILE.data.description).toBe('raw \ufffd');
      expect(byType.EXTERNAL_REFERENCE.data.metadata).toEqual({ 'n\ufffd': '\ufffd' });
      const artifact = async (uid: string) =>
        (await t.call('GET', `/api/v1/agent/artifacts/${uid}`, undefined, team.key)).body.data;
      // Text is made storable; a file's bytes (base64) are kept as they were, NUL and all.
      expect((await artifact(byType.PLAN.data.artifact_uid)).content).toBe('step\ufffdone \ufffd');
      const file = await fetch((await artifact(byType.FILE.data.artifact_uid)).download_url);
      expect([...Buffer.from(await file.arrayBuffer())]).toEqual([0, 1, 2, 255]);
    },
  );
});
