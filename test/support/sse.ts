import { eventually } from './eventually.js';

export interface SseEvent {
  id?: string;
  event: string;
  data: any;
}

export interface SseClient {
  status: number;
  contentType: string | null;
  /** Every event received so far, in order. */
  events: SseEvent[];
  /** Resolves once the server ended the stream. */
  ended: Promise<void>;
  /** Waits until `until` holds for the events received so far. */
  waitFor(until: (events: SseEvent[]) => boolean, what: string): Promise<SseEvent[]>;
  close(): void;
}

/** A Server-Sent Events client over fetch (what a script or a dashboard using fetch does). */
export async function openSse(url: string, headers: Record<string, string> = {}): Promise<SseClient> {
  const abort = new AbortController();
  const res = await fetch(url, {
    headers: { accept: 'text/event-stream', ...headers },
    signal: abort.signal,
  });
  const events: SseEvent[] = [];
  let ended: Promise<void> = Promise.resolve();
  if (res.ok && res.body) {
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    ended = (async () => {
      let buffer = '';
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return;
          buffer += value;
          let at: number;
          while ((at = buffer.indexOf('\n\n')) >= 0) {
            const frame = buffer.slice(0, at);
            buffer = buffer.slice(at + 2);
            const fields: Record<string, string> = {};
            for (const line of frame.split('\n')) {
              if (!line || line.startsWith(':')) continue;
              const colon = line.indexOf(':');
              fields[line.slice(0, colon)] = line.slice(colon + 1).replace(/^ /, '');
            }
            if (fields.data !== undefined)
              events.push({ id: fields.id, event: fields.event ?? 'message', data: JSON.parse(fields.data) });
          }
        }
      } catch {
        /* aborted or cut */
      }
    })();
  } else await res.text();
  return {
    status: res.status,
    contentType: res.headers.get('content-type'),
    events,
    ended,
    waitFor: (until, what) => eventually(() => (until(events) ? events : undefined), what),
    close: () => abort.abort(),
  };
}
