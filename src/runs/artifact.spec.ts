import { describe, expect, it } from 'vitest';
import { handoffAttachments, parseArtifactReport } from './artifact.js';

const file = (filename: string, text: string) => ({ filename, bytes: Buffer.from(text) });
const decoded = (out: Array<{ file_name: string; data: string }>) =>
  out.map((a) => [a.file_name, Buffer.from(a.data, 'base64').toString()]);

describe('handoffAttachments', () => {
  it('puts each file under handoff/ by its name alone, the newer of two same names winning', () => {
    const out = handoffAttachments([
      file('notes.md', 'old'),
      file('../../etc/passwd', 'p'),
      file('a\\b.txt', 'b'),
      file('notes.md', 'new'),
    ]);
    expect(decoded(out)).toEqual([
      ['handoff/passwd', 'p'],
      ['handoff/b.txt', 'b'],
      ['handoff/notes.md', 'new'],
    ]);
  });

  it('leaves out names that are no file name', () => {
    expect(
      handoffAttachments([file('', 'x'), file('..', 'x'), file('dir/.', 'x'), file('dir/', 'x')]),
    ).toEqual([]);
  });

  it('stops at the byte and file bounds, oldest first, skipping a file too large for what is left', () => {
    const out = handoffAttachments(
      [file('a', '12345'), file('b', '1234567'), file('c', '12'), file('d', '1')],
      8,
      2,
    );
    expect(decoded(out)).toEqual([
      ['handoff/a', '12345'],
      ['handoff/c', '12'],
    ]);
  });
});

describe('a pull request report', () => {
  const pr = (extra: Record<string, unknown>) =>
    parseArtifactReport({ artifact_type: 'PULL_REQUEST', url: 'https://x/pull/1', branch: 'fix', ...extra })
      ?.data;

  it('keeps a status the clients know, in any case, as the clients spell it', () => {
    expect(pr({ status: 'draft' })).toEqual({ url: 'https://x/pull/1', branch: 'fix', status: 'draft' });
    expect(pr({ status: 'MERGED' })?.status).toBe('merged');
  });

  it('says unknown for no status, or one the clients do not know, never the value as given', () => {
    for (const status of [undefined, '', 'reopened', 'open ', 7, null, { open: true }])
      expect(pr({ status })?.status).toBe('unknown');
  });
});
