import { UUID_PATTERN } from './ids.js';
import { invalidParam } from './problem.js';
import type { QueryParams } from './query-params.js';
import { unstorableText } from './storable.js';

/**
 * Keyset pagination for every listing: `limit` parsed with one rule and one message, opaque cursors,
 * and `page_info` built from a page fetched with one extra row.
 *
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

function encodeCursor(pos: CursorPosition): string {
  return Buffer.from(JSON.stringify([pos.scope, pos.key, pos.id])).toString('base64url');
}

function decodeCursor(cursor: string, scope: string): CursorPosition {
  let parsed: unknown;
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw new Error('not base64url');
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw forgedCursor();
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
    throw forgedCursor();
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
  if (!date || Number.isNaN(date.getTime()) || date.toISOString() !== key) throw forgedCursor();
  return key as string;
}

/** 400 for a cursor this server did not issue (or that holds values its listing cannot take). */
export function forgedCursor() {
  return invalidParam(
    'cursor',
    'cursor is not a cursor issued by this server; pass next_cursor from the previous page',
  );
}

/**
 * How long the statement of one page of a listing may run before PostgreSQL stops it and the caller
 * gets a 503 with Retry-After (Database.queryWithin). A page an index serves takes milliseconds; one
 * whose filter no index serves walks everything the listing covers, seconds for a team's 10M runs.
 */
export const PAGE_TIME_LIMIT_MS = 2000;

export interface PageInfo {
  has_next_page: boolean;
  next_cursor?: string;
}

/** What a listing request asks for: how many items, after which position. */
export interface PageRequest {
  limit: number;
  after?: CursorPosition;
}

/** `limit`: a whole number from 1 to `max`; `fallback` when absent. */
export function parseLimit(text: string | undefined, fallback: number, max: number): number {
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text) || Number(text) < 1 || Number(text) > max)
    throw invalidParam('limit', `limit must be a whole number from 1 to ${max}, got "${text}"`);
  return Number(text);
}

/**
 * `limit` and `cursor` of a listing's query; `scope` names the listing and its order (a cursor made
 * for another is refused).
 */
export function parsePageRequest(
  query: QueryParams,
  scope: string,
  limits: { fallback: number; max: number },
): PageRequest {
  const limit = parseLimit(query.one('limit'), limits.fallback, limits.max);
  const cursor = query.one('cursor');
  return { limit, after: cursor ? decodeCursor(cursor, scope) : undefined };
}

/**
 * A page from rows fetched with LIMIT `limit + 1`: the extra row only says another page exists; the
 * next cursor is the position of the page's last item.
 */
export function pageOf<T>(
  rows: T[],
  limit: number,
  positionOf: (last: T) => CursorPosition,
): { items: T[]; pageInfo: PageInfo } {
  if (rows.length <= limit) return { items: rows, pageInfo: { has_next_page: false } };
  const items = rows.slice(0, limit);
  return {
    items,
    pageInfo: { has_next_page: true, next_cursor: encodeCursor(positionOf(items[limit - 1])) },
  };
}
