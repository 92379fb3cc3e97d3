import type { FastifyRequest } from 'fastify';
import { InvalidRequest } from './problem.js';

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The API's application/json body parser (the ingress reads its bodies itself).
 *
 * - An empty body is `{}`: a body is optional on most POSTs, and the official Python client sends
 *   `content-type: application/json` with no body on cancel.
 * - Keys named `__proto__` or `constructor` are data like any other: JSON.parse makes them own
 *   properties (never a prototype), and nothing copies a body with assignment, so they reach
 *   validation, which names them where they are not known fields (and keeps them where any key is
 *   allowed, e.g. `metadata`).
 * - A body that is not UTF-8 JSON is a 400 saying where it breaks.
 */
export function parseJsonBody(
  _req: FastifyRequest,
  body: Buffer,
  done: (err: Error | null, value?: unknown) => void,
): void {
  if (body.length === 0) return done(null, {});
  let text: string;
  try {
    text = UTF8.decode(body);
  } catch {
    return done(new InvalidRequest('The request body is not valid UTF-8; send JSON encoded as UTF-8.'));
  }
  try {
    done(null, JSON.parse(text));
  } catch (err) {
    done(new InvalidRequest(`The request body is not valid JSON: ${(err as Error).message}.`));
  }
}
