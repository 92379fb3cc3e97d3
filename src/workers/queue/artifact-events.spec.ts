import { describe, expect, it } from 'vitest';
import { artifactAction, artifactReports } from './artifact-events.js';
import { parseHarnessLine } from '../protocol/harness-protocol.js';

const file = {
  type: 'artifact',
  artifact_type: 'FILE',
  filepath: 'out/a.txt',
  data: Buffer.from('hi').toString('base64'),
  handoff: true,
};

describe('artifact events', () => {
  it('reads a harness line, and the same event again from a self-hosted worker’s report', () => {
    const fromHarness = parseHarnessLine(JSON.stringify(file));
    expect(fromHarness).toMatchObject({ type: 'artifact', artifact: { artifact_type: 'FILE' } });
    // A report carries the event as the worker parsed it ({type, artifact}); the service reads it so.
    const fromReport = parseHarnessLine(JSON.stringify(fromHarness));
    expect(fromReport).toEqual(fromHarness);
    const [report] = artifactReports([fromReport]);
    expect(report).toMatchObject({
      artifact_type: 'FILE',
      handoff: true,
      data: { filename: 'a.txt', size_bytes: 2 },
    });
    expect(report!.content!.bytes.toString()).toBe('hi');
  });

  it('keeps a line that breaks its kind’s rules as a transcript line', () => {
    for (const bad of [
      { type: 'artifact', artifact_type: 'FILE', filepath: 'a', data: 'not base64!' },
      { type: 'artifact', artifact_type: 'PULL_REQUEST', url: 'https://x' },
      { type: 'artifact', artifact_type: 'VIDEO', url: 'https://x' },
      {
        type: 'artifact',
        artifact_type: 'FILE',
        filepath: 'a',
        data: Buffer.alloc(1024 * 1024 + 1).toString('base64'),
      },
    ])
      expect(parseHarnessLine(JSON.stringify(bad)).type).toBe('transcript');
  });

  it('shows in the conversation as an artifact action without its content', () => {
    const event = parseHarnessLine(JSON.stringify(file));
    if (event.type !== 'artifact') throw new Error('not an artifact');
    const action = artifactAction(event.artifact);
    expect(action).toEqual({
      type: 'action',
      kind: 'artifact',
      input: { artifact_type: 'FILE', filepath: 'out/a.txt', handoff: true },
    });
  });
});
