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
