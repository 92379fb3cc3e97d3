import { createServer } from 'node:http';
import { type Metrics, PROMETHEUS_TEXT, SCRAPE_DEPTHS_MS } from '../common/metrics.js';

/** `[host:]port`, IPv6 in brackets; the host is loopback unless given: a scrape takes no key. */
export function metricsAddress(text: string): { host: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]:|([^:\s[\]]+):)?(\d{1,5})$/.exec(text.trim());
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535)
    throw new Error(
      `--metrics takes [host:]port (say 9464, or 0.0.0.0:9464 for every interface), got "${text}"`,
    );
  return { host: m[1] ?? m[2] ?? '127.0.0.1', port };
}

/** A scrape answered within this long, or the connection is dropped: a stalled scraper holds nothing. */
const SCRAPE_REQUEST_MS = 10_000;

/**
 * `GET /metrics` of a process that serves no HTTP of its own (`serve --role notifications`,
 * `factoryd worker`), on `address`; resolves once it listens, rejects naming the address when it
 * cannot (taken, not a local address).
 */
export async function listenForMetrics(
  metrics: Metrics,
  address: string,
): Promise<{ url: string; close: () => Promise<void> }> {
  const { host, port } = metricsAddress(address);
  const server = createServer(
    { requestTimeout: SCRAPE_REQUEST_MS, headersTimeout: SCRAPE_REQUEST_MS },
    (req, res) => {
      if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') {
        res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('Only GET /metrics here.\n');
        return;
      }
      metrics.scrape(SCRAPE_DEPTHS_MS).then(
        (text) => res.writeHead(200, { 'content-type': PROMETHEUS_TEXT }).end(text),
        (err: unknown) =>
          res
            .writeHead(500, { 'content-type': 'text/plain; charset=utf-8' })
            .end(`Scrape failed: ${String(err)}\n`),
      );
    },
  );
  server.maxConnections = 32;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(new Error(`--metrics ${address}: ${err.message}`)));
    server.listen(port, host, () => resolve());
  });
  const bound = server.address() as { address: string; port: number };
  const shown = bound.address.includes(':') ? `[${bound.address}]` : bound.address;
  return {
    url: `http://${shown}:${bound.port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections(); // a scraper's kept-alive connection would hold the close
      }),
  };
}
