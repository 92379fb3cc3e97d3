import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import type { Assignment, Outcome, WorkerBackend } from '../src/workers/protocol/assignment.js';
import { RunExecution } from '../src/workers/worker/run-execution.js';
import { eventually } from './support/eventually.js';

// Issue #32: a report the service refuses used to vanish (`.catch(() => undefined)`), and a refused
// end left the run to its lease. Here the service's side is a backend that refuses what the test
// says, as the worker API does with a 400; the harness and its launcher are real.
const root = mkdtempSync(join(tmpdir(), 'factoryd-report-failures-'));
// After the run has ended the launcher still tidies its workspace into a spare here: removed once it
// has (a removal while it writes fails with ENOTEMPTY; five quick retries were once not enough under CI).
afterAll(() =>
  eventually(
    () => (rmSync(root, { recursive: true, force: true }), true),
    'the test folder removed once the launcher has tidied it',
  ),
);

it('says which report of which run failed, never its content, and sends a refused end again without its events', async () => {
  const secret = 'printed-by-the-harness';
  const ends: Outcome[] = [];
  const backend = {
    workerId: 'w-1',
    scope: 'test',
    record: async () => {
      throw new Error('events must NOT have more than 1000 items');
    },
    finish: async (_runId: string, _execution: number, outcome: Outcome) => {
      ends.push(outcome);
      if (outcome.events?.length) throw new Error('the body events.0.text contains a NUL character');
    },
  } as unknown as WorkerBackend;
  const said: string[] = [];
  const assignment: Assignment = {
    run_id: 'run-1',
    team_id: 'team-1',
    execution: 1,
    session_id: 'session-1',
    prompt: 'go',
    agent_config: {},
    followups: [],
    attachments: [],
    skills: [],
    history: [],
  };
  const exec = new RunExecution(assignment, backend, {
    // A BLOCKED status (reported at once: refused), then a last line with the exit (the end's events,
    // as a short run's are: test/workers.test.ts, "in one report").
    harnessCommand: `read -r p; echo '{"type":"status","state":"BLOCKED","message":"${secret}"}'; echo ${secret}-last`,
    killGraceMs: 1000,
    workspaceRoot: root,
    idleMinuteMs: 60_000,
    sandbox: { mode: 'none' },
    envAllow: [],
    selfHosted: false,
    idleTimeoutMinutes: 0,
    maxDurationMinutes: 0,
    clis: {},
    transcriptBudget: { bytes: 1 << 20, events: 1000 },
    onReportFailed: (runId, report, err) => said.push(`${runId} ${report}: ${(err as Error).message}`),
  });
  await exec.run();
  await exec.reported;

  expect(said).toContain('run-1 events: events must NOT have more than 1000 items');
  expect(said).toContain('run-1 end: the body events.0.text contains a NUL character');
  expect(said.join('\n')).not.toContain(secret);
  // The end went twice: with its last events (refused), then without them, its exit intact.
  expect(ends).toHaveLength(2);
  expect(ends[0]!.events!.map((e) => (e as { text: string }).text)).toEqual([`${secret}-last`]);
  expect(ends[1]).toMatchObject({ exitCode: 0, events: [] });
});
