/**
 * Every call the dashboard makes to the API, and the one place that keeps data live: `useLive` loads
 * (and polls, slowly), `useFeed` listens to the API's server-sent events and says when to load again.
 * The API key travels only in the Authorization header, never in a URL, and is kept in
 * sessionStorage (gone when the tab closes).
 */
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiOperations, queryString } from '../../src/contract/client';
import type { ApiKeyInfo, Team } from '../../src/contract/generated';

export type { Team };

/** A signed-in key: who it is (GET /api-key) and the team every request is for. */
export interface Session extends ApiKeyInfo {
  key: string;
  /** The team every request is for (X-Team-Uid when the key has several). */
  team: Team;
}

const STORE = 'factoryd.session';

export function loadSession(): Session | undefined {
  try {
    const raw = sessionStorage.getItem(STORE);
    return raw ? (JSON.parse(raw) as Session) : undefined;
  } catch {
    return undefined;
  }
}

export function saveSession(s: Session | undefined): void {
  if (s) sessionStorage.setItem(STORE, JSON.stringify(s));
  else sessionStorage.removeItem(STORE);
}

/** An RFC 7807 problem from the API (or a network failure), with the `detail` a person can act on. */
export class ApiProblem extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    readonly detail: string,
    readonly code?: string,
  ) {
    super(detail || title);
  }
}

let current: Session | undefined = loadSession();
let onSignedOut: () => void = () => undefined;

export function useSessionState(): [Session | undefined, (s: Session | undefined) => void] {
  const [s, set] = useState(current);
  const update = useCallback((next: Session | undefined) => {
    current = next;
    saveSession(next);
    set(next);
  }, []);
  onSignedOut = () => update(undefined);
  return [s, update];
}

/** The team every request is for (the sign-in's choice). */
export function currentTeam(): Team | undefined {
  return current?.team;
}

export function can(scope: string): boolean {
  return current?.scopes.includes(scope) ?? false;
}

function authHeaders(accept: string, key = current?.key, team = current?.team): Record<string, string> {
  const headers: Record<string, string> = { accept };
  if (key) headers.authorization = `Bearer ${key}`;
  if (team && current && current.teams.length > 1) headers['x-team-uid'] = team.uid;
  return headers;
}

async function send<T>(
  method: string,
  path: string,
  body?: unknown,
  key = current?.key,
  team = current?.team,
  /** The body as text (a transcript), not JSON; errors are problems all the same. */
  asText = false,
): Promise<T> {
  const headers = authHeaders(
    asText ? 'text/plain, application/problem+json' : 'application/json',
    key,
    team,
  );
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(`/api/v1${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'omit',
      cache: 'no-store',
    });
  } catch {
    throw new ApiProblem(0, 'Network error', 'The service did not answer. Is it running?');
  }
  const text = await res.text();
  if (asText && res.ok) return text as T;
  let parsed: any;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = text;
  }
  if (!res.ok) {
    const p = typeof parsed === 'object' && parsed ? parsed : {};
    const problem = new ApiProblem(res.status, p.title ?? res.statusText, p.detail ?? '', p.error);
    if (res.status === 401 && key === current?.key && current) onSignedOut();
    throw problem;
  }
  return parsed as T;
}

export const api = {
  get: <T>(path: string) => send<T>('GET', path),
  /** A text body (a run's transcript; a redirect to its signed link is followed). */
  text: (path: string) => send<string>('GET', path, undefined, current?.key, current?.team, true),
  post: <T>(path: string, body?: unknown) => send<T>('POST', path, body),
  del: (path: string) => send<void>('DELETE', path),
  /** Sign-in: who a key is, before it becomes the session's. */
  whoAmI: (key: string) =>
    new ApiOperations((method, path) => send(method, path, undefined, key, undefined)).call('whoAmI'),
};

/** The typed operations (src/contract, generated from schemas/api): `wire.call('getRun', { runId })`. */
export const wire = new ApiOperations((method, path, body) => send(method, path, body));

/** A query string from the set fields (arrays repeat the key); the typed client's own. */
export const query = queryString;

export interface Live<T> {
  data: T | undefined;
  error: ApiProblem | undefined;
  loading: boolean;
  reload: () => void;
}

/**
 * `load` now and again every `everyMs` while the tab is visible (0: once). Keeps the last good data
 * while a refresh fails, so a blip shows an error without blanking the page.
 */
export function useLive<T>(load: () => Promise<T>, deps: unknown[], everyMs = 0): Live<T> {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<ApiProblem>();
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  const loader = useRef(load);
  loader.current = load;
  useEffect(() => {
    setData(undefined);
    setLoading(true);
  }, deps);
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async () => {
      try {
        const next = await loader.current();
        if (stopped) return;
        setData(next);
        setError(undefined);
      } catch (e) {
        if (!stopped) setError(e instanceof ApiProblem ? e : new ApiProblem(0, 'Error', String(e)));
      } finally {
        if (!stopped) {
          setLoading(false);
          if (everyMs > 0) timer = setTimeout(tickWhenVisible, everyMs);
        }
      }
    };
    const tickWhenVisible = () => {
      if (document.visibilityState === 'visible') void run();
      else timer = setTimeout(tickWhenVisible, everyMs);
    };
    void run();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [...deps, tick, everyMs]);
  return { data, error, loading, reload: () => setTick((n) => n + 1) };
}

/** A state-changing call from a button: its pending flag and its problem, shown beside it. */
export function useAction<A extends unknown[], T>(act: (...args: A) => Promise<T>) {
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<ApiProblem>();
  const run = async (...args: A): Promise<T | undefined> => {
    setPending(true);
    setError(undefined);
    try {
      return await act(...args);
    } catch (e) {
      setError(
        e instanceof ApiProblem ? e : new ApiProblem(0, 'Error', e instanceof Error ? e.message : String(e)),
      );
      return undefined;
    } finally {
      setPending(false);
    }
  };
  return { run, pending, error, clear: () => setError(undefined) };
}

/** Events closer together than this cause one reload: a burst of changes is one refresh. */
const FEED_COALESCE_MS = 150;
/** After a dropped feed, the pause before reconnecting grows from the first to the last. */
const FEED_RETRY_MS = [1000, 2000, 5000, 15000];

/**
 * Listens to the server-sent-events feed at `path` (an API path) and calls `onChange` when it sends
 * an event (coalesced), and once on each reconnect (what happened meanwhile is reloaded, not
 * replayed). Returns whether the feed is open: pages poll slowly while it is, as a safety net, and
 * at their usual pace while it is not. Read with fetch rather than EventSource, which cannot send
 * the Authorization header (the key must never be in a URL). `path` undefined: no feed.
 */
export function useFeed(path: string | undefined, onChange: () => void): boolean {
  const [open, setOpen] = useState(false);
  const changed = useRef(onChange);
  changed.current = onChange;
  useEffect(() => {
    if (!path) return;
    const abort = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const soon = () => {
      timer ??= setTimeout(() => {
        timer = undefined;
        changed.current();
      }, FEED_COALESCE_MS);
    };
    const listen = async (attempt: number): Promise<void> => {
      let received = false;
      try {
        const res = await fetch(`/api/v1${path}`, {
          headers: authHeaders('text/event-stream'),
          credentials: 'omit',
          cache: 'no-store',
          signal: abort.signal,
        });
        if (res.status === 401) return onSignedOut();
        // Another 4xx will not change by asking again (the page polls instead); a 5xx may.
        if (res.status >= 400 && res.status < 500) return;
        if (!res.ok || !res.body) throw new Error(`the feed answered ${res.status}`);
        setOpen(true);
        if (attempt > 0) soon();
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffered = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffered += value;
          const blocks = buffered.split('\n\n');
          buffered = blocks.pop() ?? '';
          // A block with a field other than comments (heartbeats are `: …` lines) is an event.
          if (blocks.some((b) => b.split('\n').some((line) => line !== '' && !line.startsWith(':')))) {
            received = true;
            soon();
          }
        }
      } catch {
        // aborted (the page left) or dropped: reconnect below unless aborted
      } finally {
        setOpen(false);
      }
      if (abort.signal.aborted) return;
      const pause = FEED_RETRY_MS[Math.min(received ? 0 : attempt, FEED_RETRY_MS.length - 1)]!;
      await new Promise((r) => setTimeout(r, pause));
      if (!abort.signal.aborted) await listen(received ? 1 : attempt + 1);
    };
    void listen(0);
    return () => {
      abort.abort();
      clearTimeout(timer);
    };
  }, [path]);
  return open;
}
