import { UUID_PATTERN } from './ids.js';
import { invalidParam } from './problem.js';
import { unstorableText } from './storable.js';

/**
 * Opaque keyset cursors: the position after the last item of a page, base64url-encoded JSON.
 * `scope` binds a cursor to the ordering it was made for, so a cursor from one listing (or one
 * sort) is refused instead of silently giving a wrong page.
 */
export interface CursorPosition {
  scope: string;
  /** The sort key value of the last item (string, number or null). */
  key: string | number | null;
  /** The unique tie-breaker of the last item. */
  id: string;
}

export function encodeCursor(pos: CursorPosition): string {
  return Buffer.from(JSON.stringify([pos.scope, pos.key, pos.id])).toString('base64url');
}

export function decodeCursor(cursor: string, scope: string): CursorPosition {
  let parsed: unknown;
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw new Error('not base64url');
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalidParam(
      'cursor',
      'cursor is not a cursor issued by this server; pass next_cursor from the previous page',
    );
  }
  if (
    !Array.isArray(parsed) ||
    parsed.length !== 3 ||
    typeof parsed[0] !== 'string' ||
    !(typeof parsed[1] === 'string' || typeof parsed[1] === 'number' || parsed[1] === null) ||
    (typeof parsed[1] === 'string' && unstorableText(parsed[1]) !== undefined) ||
    typeof parsed[2] !== 'string' ||
    // Every listing's tie-breaker is a UUID: anything else is forged, and must not reach the SQL.
    !UUID_PATTERN.test(parsed[2])
  ) {
    throw invalidParam(
      'cursor',
      'cursor is not a cursor issued by this server; pass next_cursor from the previous page',
    );
  }
  if (parsed[0] !== scope) {
    throw invalidParam(
      'cursor',
      'cursor was issued for a different sort order; keep sort_by and sort_order the same across pages',
    );
  }
  return { scope: parsed[0], key: parsed[1], id: parsed[2] };
}

/** The key of a cursor made from a timestamp's toISOString(); a forged one is a 400, not a database error. */
export function isoKey(pos: CursorPosition): string {
  const key = pos.key;
  const date = typeof key === 'string' ? new Date(key) : undefined;
  if (!date || Number.isNaN(date.getTime()) || date.toISOString() !== key)
    throw invalidParam(
      'cursor',
      'cursor is not a cursor issued by this server; pass next_cursor from the previous page',
    );
  return key as string;
}

export interface PageInfo {
  has_next_page: boolean;
  next_cursor?: string;
}
