import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageProgramCommand } from '../src/workers/launcher/harness-programs.js';
import { runIn, startTestService, type TestService } from './support/service.js';
import { twoTeamsNote, twoTeamsRefused } from './support/sandbox-check.js';

// A continued run's next execution receives, in its workspace under handoff/, the files its previous
// execution left as handoff (test/fixtures/handoff-harness.mjs answers with what it found), and only its own.
let t: TestService;
beforeAll(async () => {
  t = await startTestService({
    WORKER_CONCURRENCY: '1',
    HARNESS_COMMAND: packageProgramCommand('test/fixtures', 'handoff-harness.mjs'),
  });
});
afterAll(async () => t?.stop());

/** What the harness of the run's latest execution found under handoff/. */
const found = (run: any) => JSON.parse(run.status_message.message);

async function runTwice(prompt: string, key?: string) {
  const id = (await t.call('POST', '/api/v1/agent/runs', { prompt }, key)).body.run_id;
  const first = await runIn(t, id, ['SUCCEEDED', 'FAILED', 'ERROR'], key);
  expect(first.state).toBe('SUCCEEDED');
  expect(found(first)).toEqual({ found: [], listed: [] });
  const again = await t.call('POST', `/api/v1/agent/runs/${id}/followups`, { message: 'Go on' }, key);
  expect(again.status).toBeLessThan(300);
  // The follow-up re-queued the ended run (synchronously): this waits for execution 2's end.
  const second = await runIn(t, id, ['SUCCEEDED', 'FAILED', 'ERROR'], key);
  return { id, second };
}

describe.skipIf(twoTeamsRefused)(`handoff files reach the next execution${twoTeamsNote}`, () => {
  it("puts what execution 1 left under handoff/ in execution 2's workspace, and no other team's", async () => {
    const { key } = await t.newTeam('handoff-other', ['runs:read', 'runs:write']);
    const mine = await runTwice('Leave notes');
    const theirs = await runTwice('Leave other notes', key);
    for (const { id, second } of [mine, theirs]) {
      expect(second.state).toBe('SUCCEEDED');
      expect(found(second)).toEqual({
        found: [{ name: 'notes.md', text: `notes of ${id}, execution 1` }],
        listed: ['handoff/notes.md'],
      });
    }
  });

  it("gives a new run that continues a conversation what the conversation's previous run left", async () => {
    const { key } = await t.newTeam('handoff-thief', ['runs:read', 'runs:write']);
    const first = (await t.call('POST', '/api/v1/agent/runs', { prompt: 'Start' })).body.run_id;
    const ended = await runIn(t, first, ['SUCCEEDED', 'FAILED', 'ERROR']);
    const next = (
      await t.call('POST', '/api/v1/agent/runs', {
        prompt: 'Continue',
        conversation_id: ended.conversation_id,
      })
    ).body.run_id;
    const run = await runIn(t, next, ['SUCCEEDED', 'FAILED', 'ERROR']);
    expect(found(run)).toEqual({
      found: [{ name: 'notes.md', text: `notes of ${first}, execution 1` }],
      listed: ['handoff/notes.md'],
    });
    // Another team cannot continue it (404), and its own new runs start with nothing.
    const stolen = await t.call(
      'POST',
      '/api/v1/agent/runs',
      { prompt: 'Mine now', conversation_id: ended.conversation_id },
      key,
    );
    expect(stolen.status).toBe(404);
    const theirs = (await t.call('POST', '/api/v1/agent/runs', { prompt: 'Fresh' }, key)).body.run_id;
    expect(found(await runIn(t, theirs, ['SUCCEEDED', 'FAILED', 'ERROR'], key))).toEqual({
      found: [],
      listed: [],
    });
  });
});
