import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageProgramCommand } from '../../src/workers/launcher/harness-programs.js';
import { forgedLink } from '../support/artifacts.js';
import { runIn, startTestService, type TestService } from '../support/service.js';
import { python, typescript } from './support.js';
import { SchemaRegistry } from '../../src/common/schema-validator.js';
import { twoTeamsNote, twoTeamsRefused } from '../support/sandbox-check.js';

// A real worker runs a harness that reports one artifact of every kind (test/fixtures/artifact-harness.mjs);
// the clients read them back: the run's artifacts, GET /agent/artifacts/{uid}, its download link, and
// the handoff files (GET /agent/runs/{id}/handoff/attachments).
let t: TestService;
beforeAll(async () => {
  t = await startTestService({
    WORKER_CONCURRENCY: '1',
    HARNESS_COMMAND: packageProgramCommand('test/fixtures', 'artifact-harness.mjs'),
  });
});
afterAll(async () => t?.stop());

/** A download link fetched as a client does: no key. */
const fetchLink = async (url: string) => {
  const res = await fetch(url);
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
};

describe('artifacts a run leaves', () => {
  it('lists them on the run as ArtifactItem, serves each by uid, and downloads files through signed links', async () => {
    const id = (await python(t, 'POST', '/agent/runs', { prompt: 'Leave artifacts' })).body.run_id;
    const run = await runIn(t, id, ['SUCCEEDED', 'FAILED', 'ERROR']);
    expect(run.state).toBe('SUCCEEDED');
    expect(run.artifacts.map((a: any) => a.artifact_type)).toEqual([
      'PLAN',
      'PULL_REQUEST',
      'SCREENSHOT',
      'FILE',
      'EXTERNAL_REFERENCE',
    ]);
    // The run and each artifact as the API documents them (schemas/api/run-item, artifact-item).
    const schemas = new SchemaRegistry();
    expect(schemas.check('RunItem', run)).toEqual([]);
    const [plan, pr, shot, file, ref] = run.artifacts;
    for (const a of run.artifacts) expect(Date.parse(a.created_at)).not.toBeNaN();
    expect(plan.data).toEqual({
      artifact_uid: expect.any(String),
      document_uid: plan.data.artifact_uid,
      notebook_uid: plan.data.artifact_uid,
      title: 'The plan',
    });
    // The newest TypeScript client requires a pull request's `status`; this harness reports none.
    expect(pr.data).toEqual({
      artifact_uid: expect.any(String),
      url: 'https://github.com/acme/api/pull/7',
      branch: 'fix/crash',
      status: 'unknown',
    });
    expect(shot.data).toMatchObject({
      artifact_uid: expect.any(String),
      mime_type: 'image/png',
      description: 'After',
    });
    expect(file.data).toMatchObject({
      artifact_uid: expect.any(String),
      filename: 'notes.md',
      filepath: 'out/notes.md',
      mime_type: 'text/markdown',
      size_bytes: Buffer.byteLength(`notes of ${id}, execution 1`),
    });
    expect(ref.data).toMatchObject({
      reference_type: 'linear_issue',
      url: 'https://linear.app/acme/issue/ENG-1',
      title: 'ENG-1',
    });

    // The conversation shows each artifact as an action, without its content.
    const conv = (await t.call('GET', `/api/v1/agent/runs/${id}/conversation`)).body;
    const actions = conv.messages.filter((m: any) => m.kind === 'artifact');
    expect(actions).toHaveLength(5);
    expect(JSON.stringify(actions)).not.toContain(Buffer.from('PNG!').toString('base64'));

    const gotPlan = await python(t, 'GET', `/agent/artifacts/${plan.data.artifact_uid}`);
    expect(gotPlan.body).toEqual({
      artifact_type: 'PLAN',
      artifact_uid: plan.data.artifact_uid,
      created_at: plan.created_at,
      data: {
        content: '# Plan\n1. Fix the crash',
        content_type: 'text/markdown',
        document_uid: plan.data.artifact_uid,
        notebook_uid: plan.data.artifact_uid,
        title: 'The plan',
      },
    });
    expect(schemas.check('ArtifactItem', gotPlan.body)).toEqual([]);
    const gotFile = (await python(t, 'GET', `/agent/artifacts/${file.data.artifact_uid}`)).body;
    expect(schemas.check('ArtifactItem', gotFile)).toEqual([]);
    expect(gotFile).toMatchObject({
      artifact_type: 'FILE',
      data: {
        content_type: 'text/markdown',
        filename: 'notes.md',
        filepath: 'out/notes.md',
        expires_at: expect.any(String),
      },
    });
    const download = await fetchLink(gotFile.data.download_url);
    expect(download).toMatchObject({
      status: 200,
      type: 'text/markdown',
      text: `notes of ${id}, execution 1`,
    });
    const gotPr = (await python(t, 'GET', `/agent/artifacts/${pr.data.artifact_uid}`)).body;
    expect(gotPr).toEqual({
      artifact_type: 'PULL_REQUEST',
      artifact_uid: pr.data.artifact_uid,
      created_at: pr.created_at,
      data: { url: 'https://github.com/acme/api/pull/7', branch: 'fix/crash', status: 'unknown' },
    });
    expect(schemas.check('ArtifactItem', gotPr)).toEqual([]);
    // The schema holds a pull request to what the client requires: without a status it is no ArtifactItem.
    const { status: _status, ...withoutStatus } = gotPr.data;
    expect(schemas.check('ArtifactItem', { ...gotPr, data: withoutStatus })).not.toEqual([]);
    const gotShot = (await python(t, 'GET', `/agent/artifacts/${shot.data.artifact_uid}`)).body;
    expect(gotShot).toMatchObject({ artifact_type: 'SCREENSHOT', data: { content_type: 'image/png' } });
    expect((await fetchLink(gotShot.data.download_url)).text).toBe('PNG!');

    // A link whose signature was changed, or that names another artifact, opens nothing.
    const forged = forgedLink(gotFile.data.download_url);
    expect((await fetchLink(forged)).status).toBe(403);
    const swapped = gotFile.data.download_url.replace(file.data.artifact_uid, shot.data.artifact_uid);
    expect((await fetchLink(swapped)).status).toBe(403);

    expect(
      (await python(t, 'GET', '/agent/runs?artifact_type=SCREENSHOT')).body.runs.map((r: any) => r.run_id),
    ).toEqual([id]);
    expect(
      (await python(t, 'GET', `/agent/artifacts/${'0'.repeat(8)}-0000-4000-8000-${'0'.repeat(12)}`)).status,
    ).toBe(404);
  });

  it('lists the handoff files of the latest ended execution, and a continued run leaves new ones', async () => {
    const id = (await python(t, 'POST', '/agent/runs', { prompt: 'Hand off' })).body.run_id;
    await runIn(t, id, ['SUCCEEDED']);
    const first = await python(t, 'GET', `/agent/runs/${id}/handoff/attachments`);
    expect(first.status).toBe(200);
    expect(first.body.attachments).toEqual([
      {
        attachment_id: expect.any(String),
        filename: 'notes.md',
        mime_type: 'text/markdown',
        download_url: expect.stringContaining('/download?'),
      },
    ]);
    expect((await fetchLink(first.body.attachments[0].download_url)).text).toBe(
      `notes of ${id}, execution 1`,
    );

    await python(t, 'POST', `/agent/runs/${id}/followups`, { message: 'Once more' });
    await runIn(t, id, ['SUCCEEDED']);
    const after = (await python(t, 'GET', `/agent/runs/${id}/handoff/attachments`)).body.attachments;
    expect(after).toHaveLength(1);
    const second = after[0];
    expect((await fetchLink(second.download_url)).text).toBe(`notes of ${id}, execution 2`);
  });

  it('downloads an artifact with the API key, as the newest TypeScript client’s downloadArtifact sends it', async () => {
    const id = (await python(t, 'POST', '/agent/runs', { prompt: 'Leave a file' })).body.run_id;
    const run = await runIn(t, id, ['SUCCEEDED']);
    const [plan, pr, shot, file] = run.artifacts;
    const download = (uid: string, key: string | null = t.adminKey) =>
      typescript(t, 'GET', `/agent/artifacts/${uid}/download`, undefined, key, {
        accept: 'application/octet-stream',
      });

    const got = await download(file.data.artifact_uid);
    expect(got).toMatchObject({ status: 200, text: `notes of ${id}, execution 1` });
    expect(got.headers.get('content-type')).toBe('text/markdown');
    expect((await download(shot.data.artifact_uid)).text).toBe('PNG!');
    expect((await download(plan.data.artifact_uid)).text).toBe('# Plan\n1. Fix the crash');
    // A pull request has nothing to download.
    expect((await download(pr.data.artifact_uid)).status).toBe(404);

    // Another team's key, a key without runs:read, and no key (nor link) at all.
    const { key: stranger } = await t.newTeam('download-strangers', ['runs:read']);
    expect((await download(file.data.artifact_uid, stranger)).status).toBe(404);
    const writer = await t.newKey([t.defaultTeam], ['runs:write']);
    expect((await download(file.data.artifact_uid, writer)).status).toBe(403);
    const anonymous = await download(file.data.artifact_uid, null);
    expect(anonymous.status).toBe(403);
    expect(anonymous.body.detail).toContain('download_url');
  });

  it.skipIf(twoTeamsRefused)(
    `finds the run that reported an external reference by its URL (getRunByExternalReference)${twoTeamsNote}`,
    async () => {
      const id = (await python(t, 'POST', '/agent/runs', { prompt: 'Reference a ticket' })).body.run_id;
      await runIn(t, id, ['SUCCEEDED']);
      const url = encodeURIComponent('https://linear.app/acme/issue/ENG-1');
      // Every run of this harness references ENG-1: the newest one reported it.
      expect((await typescript(t, 'GET', `/agent/run-by-external-reference?url=${url}`)).body).toEqual({
        run_id: id,
      });
      const unknown = await typescript(
        t,
        'GET',
        '/agent/run-by-external-reference?url=https%3A%2F%2Fnowhere',
      );
      expect(unknown.status).toBe(404);
      const missing = await typescript(t, 'GET', '/agent/run-by-external-reference');
      expect(missing.status).toBe(400);
      expect(missing.body.invalid_params[0].name).toBe('url');
      const { key } = await t.newTeam('reference-strangers', ['runs:read']);
      expect(
        (await typescript(t, 'GET', `/agent/run-by-external-reference?url=${url}`, undefined, key)).status,
      ).toBe(404);
    },
  );

  it.skipIf(twoTeamsRefused)(
    `another team gets 404 for the artifact and the handoff files${twoTeamsNote}`,
    async () => {
      const id = (await python(t, 'POST', '/agent/runs', { prompt: 'Private artifacts' })).body.run_id;
      const run = await runIn(t, id, ['SUCCEEDED']);
      const { key } = await t.newTeam('artifact-thieves', ['runs:read', 'runs:write']);
      for (const a of run.artifacts)
        expect(
          (await python(t, 'GET', `/agent/artifacts/${a.data.artifact_uid}`, undefined, key)).status,
        ).toBe(404);
      expect((await python(t, 'GET', `/agent/runs/${id}/handoff/attachments`, undefined, key)).status).toBe(
        404,
      );
      expect((await python(t, 'GET', '/agent/runs?artifact_type=FILE', undefined, key)).body.runs).toEqual(
        [],
      );
    },
  );
});
