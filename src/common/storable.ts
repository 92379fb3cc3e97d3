/**
 * What PostgreSQL cannot store, found at the edge (request bodies, query strings, path parameters,
 * webhook payloads) so that it is a 400 naming the field, never a database error: NUL in text and
 * jsonb, UTF-16 surrogates that pair with nothing (jsonb refuses the escape; text would silently
 * get U+FFFD), and JSON nested deeper than any caller needs, which the recursive code on the way out
 * (JSON.stringify, presenters, Test filter) could not serve.
 */

/** The deepest nesting a JSON value may have: generous (real payloads stay under 20), and safe to recurse. */
export const MAX_JSON_DEPTH = 512;

export interface InputProblem {
  /** Dotted path (`config.name`, `metadata.owner`), or the parameter's name; empty for the body itself. */
  path: string;
  message: string;
}

/** A high surrogate not followed by a low one, or a low one not preceded by a high one (code units: no `u` flag). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Why PostgreSQL cannot store `text`, or undefined when it can. */
export function unstorableText(text: string): string | undefined {
  if (text.includes('\u0000')) return 'contains a NUL character (\\u0000), which cannot be stored';
  if (LONE_SURROGATE.test(text))
    return 'contains an unpaired UTF-16 surrogate (e.g. \\ud800), which is not text';
  return undefined;
}

/**
 * The first problem of a parsed JSON value, walked without recursion: nesting deeper than
 * MAX_JSON_DEPTH, then (unless `depthOnly`) a key or string PostgreSQL cannot store. `path` names the
 * value itself (empty for a whole body).
 */
export function findInputProblem(
  value: unknown,
  path = '',
  opts: { depthOnly?: boolean } = {},
): InputProblem | undefined {
  const pending: Array<{ value: unknown; path: string; depth: number }> = [{ value, path, depth: 0 }];
  const join = (parent: string, key: string) => (parent ? `${parent}.${key}` : key);
  const name = (p: string) => p || 'the body';
  for (let item = pending.pop(); item; item = pending.pop()) {
    const { value: v, path: at, depth } = item;
    if (typeof v === 'string') {
      const why = opts.depthOnly ? undefined : unstorableText(v);
      if (why) return { path: at, message: `${name(at)} ${why}` };
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (depth >= MAX_JSON_DEPTH)
      return {
        path: at,
        message: `${name(at)} is nested more than ${MAX_JSON_DEPTH} levels deep (objects and arrays within each other)`,
      };
    for (const [key, child] of Object.entries(v)) {
      const why = opts.depthOnly || Array.isArray(v) ? undefined : unstorableText(key);
      if (why) return { path: at, message: `${name(at)} has a key that ${why}` };
      pending.push({ value: child, path: join(at, key), depth: depth + 1 });
    }
  }
  return undefined;
}

/** NUL and lone surrogates, each replaced by U+FFFD (LONE_SURROGATE's, global). */
// eslint-disable-next-line no-control-regex -- NUL is what it is for
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * `text` as PostgreSQL can store it: each NUL and each unpaired surrogate replaced by U+FFFD (the
 * replacement character, what a UTF-8 decoder puts for bytes that are no text). For what a harness
 * prints, which is stored as it comes, where a caller's input is refused (unstorableText).
 */
export function storableText(text: string): string {
  return unstorableText(text) === undefined ? text : text.replace(UNSTORABLE, '\ufffd');
}

/** What stands for a part of a harness's JSON nested deeper than `maxDepth`. */
export const TOO_DEEP = '[nested too deep: not stored]';

/**
 * A parsed JSON value as PostgreSQL can store it and the service can serve it: every string and key
 * through storableText, and what lies deeper than `maxDepth` replaced by TOO_DEEP. Walked without
 * recursion (a harness may print `[[[[…` a megabyte deep). Returns a copy (objects without a
 * prototype, so that a `__proto__` key stays a key).
 */
export function storableValue(value: unknown, maxDepth = MAX_JSON_DEPTH): unknown {
  const root: { v: unknown } = { v: value };
  const pending: Array<{ holder: Record<string, unknown>; key: string; depth: number }> = [
    { holder: root as Record<string, unknown>, key: 'v', depth: 0 },
  ];
  for (let item = pending.pop(); item; item = pending.pop()) {
    const { holder, key, depth } = item;
    const v = holder[key];
    if (typeof v === 'string') {
      holder[key] = storableText(v);
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (depth >= maxDepth) {
      holder[key] = TOO_DEEP;
      continue;
    }
    const copy: Record<string, unknown> = Array.isArray(v) ? ([...v] as never) : Object.create(null);
    if (!Array.isArray(v)) for (const [k, child] of Object.entries(v)) copy[storableText(k)] = child;
    holder[key] = copy;
    for (const k of Object.keys(copy)) pending.push({ holder: copy, key: k, depth: depth + 1 });
  }
  return root.v;
}
