import { expect } from 'vitest';
import type { TestService } from './service.js';

/** A FILE artifact's text, as a client reads it: GET /agent/artifacts/{uid}, then its download link. */
export async function artifactText(
  on: Pick<TestService, 'call'>,
  artifact: { artifact_type: string; data: { artifact_uid: string } },
  key?: string,
): Promise<string> {
  expect(artifact.artifact_type).toBe('FILE');
  const got = await on.call('GET', `/api/v1/agent/artifacts/${artifact.data.artifact_uid}`, undefined, key);
  expect(got.status).toBe(200);
  const res = await fetch(got.body.data.download_url);
  expect(res.status).toBe(200);
  return res.text();
}

/**
 * The signed link with the first character of its signature changed to one it is not: a fixed
 * replacement forges nothing when the signature happens to start with it (1 run in 64).
 */
export function forgedLink(link: string): string {
  return link.replace(/signature=(.)/, (_, first: string) => `signature=${first === 'A' ? 'B' : 'A'}`);
}
