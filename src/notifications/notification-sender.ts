import { createHmac } from 'node:crypto';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https, { Agent as HttpsAgent } from 'node:https';
import type { LookupFunction } from 'node:net';
import { isPrivateAddress } from '../common/outbound-url.js';
import { RESPONSE_EXCERPT_BYTES } from './notification-policy.js';

/** One signed POST as the attempt log records it. */
export interface AttemptOutcome {
  succeeded: boolean;
  statusCode: number | null;
  latencyMs: number;
  error: string | null;
  responseExcerpt: string | null;
}

export interface OutgoingMessage {
  /** `webhook-id`: the message's id, the same on every attempt (receivers deduplicate on it). */
  id: string;
  /** Whose connections carry it: each endpoint has its own. */
  endpointId: string;
  url: string;
  /** The endpoint's `whsec_…` secret. */
  secret: string;
  body: string;
}

export interface SenderOptions {
  allowPrivate: boolean;
  timeoutMs: number;
  /** Connections to one endpoint at once (its attempts beyond them wait for one). */
  connectionsPerEndpoint: number;
  now?: () => Date;
}

/** An endpoint's connections are closed once it has not been sent to for this long. */
const IDLE_ENDPOINT_MS = 60_000;

/**
 * Sends a notification: a Standard Webhooks signed POST (`webhook-id`, `webhook-timestamp`,
 * `webhook-signature`), no redirects followed, NOTIFICATIONS_TIMEOUT_MS for the whole exchange. Unless
 * private destinations are allowed, the address the name resolves to is checked when connecting (a
 * check of the URL alone would let DNS answer differently later).
 *
 * Each endpoint has its own keep-alive connections, at most `connectionsPerEndpoint`: two endpoints on
 * one host (two teams' paths on a shared service) never wait for each other's sockets, and one that
 * hangs holds only its own.
 */
export class NotificationSender {
  private readonly agents = new Map<string, { agent: http.Agent; usedAt: number }>();

  constructor(private readonly opts: SenderOptions) {}

  /** Closes the connections of endpoints not sent to lately (and, with `all`, every one). */
  closeIdle(all = false): void {
    const before = performance.now() - IDLE_ENDPOINT_MS;
    for (const [id, a] of this.agents)
      if (all || a.usedAt < before) {
        a.agent.destroy();
        this.agents.delete(id);
      }
  }

  /** The endpoint's connections, kept between attempts (each was checked by the lookup when it opened). */
  private agentOf(endpointId: string, secure: boolean): http.Agent {
    const key = `${endpointId} ${secure ? 'https' : 'http'}`;
    let a = this.agents.get(key);
    if (!a) {
      const options = { keepAlive: true, maxSockets: this.opts.connectionsPerEndpoint };
      a = { agent: secure ? new HttpsAgent(options) : new http.Agent(options), usedAt: 0 };
      this.agents.set(key, a);
    }
    a.usedAt = performance.now();
    return a.agent;
  }

  async send(m: OutgoingMessage): Promise<AttemptOutcome> {
    const started = performance.now();
    const at = this.opts.now?.() ?? new Date();
    const timestamp = String(Math.floor(at.getTime() / 1000));
    const headers = {
      'content-type': 'application/json',
      'user-agent': 'factoryd-notifications',
      'webhook-id': m.id,
      'webhook-timestamp': timestamp,
      'webhook-signature': standardWebhooksSignature(m.secret, m.id, timestamp, m.body),
    };
    const elapsed = () => Math.round(performance.now() - started);
    try {
      const { status, excerpt } = await this.post(m.endpointId, m.url, headers, m.body);
      return {
        succeeded: status >= 200 && status < 300,
        statusCode: status,
        latencyMs: elapsed(),
        error: status >= 200 && status < 300 ? null : `HTTP ${status}`,
        responseExcerpt: excerpt,
      };
    } catch (err) {
      return {
        succeeded: false,
        statusCode: null,
        latencyMs: elapsed(),
        error: err instanceof Error ? err.message : String(err),
        responseExcerpt: null,
      };
    }
  }

  private post(
    endpointId: string,
    url: string,
    headers: Record<string, string>,
    body: string,
  ): Promise<{ status: number; excerpt: string }> {
    const u = new URL(url);
    const client = u.protocol === 'https:' ? https : http;
    const timeoutMs = this.opts.timeoutMs;
    return new Promise((resolve, reject) => {
      const req = client.request(
        u,
        {
          method: 'POST',
          headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
          lookup: this.opts.allowPrivate ? undefined : publicOnlyLookup,
          agent: this.agentOf(endpointId, u.protocol === 'https:'),
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            if (size < RESPONSE_EXCERPT_BYTES) chunks.push(c);
            size += c.length;
          });
          res.on('end', () => {
            clearTimeout(timer);
            resolve({
              status: res.statusCode ?? 0,
              excerpt: Buffer.concat(chunks).subarray(0, RESPONSE_EXCERPT_BYTES).toString('utf8'),
            });
          });
          res.on('error', fail);
        },
      );
      // One timer for the whole exchange (an AbortSignal per attempt cost more than the signature).
      const timer = setTimeout(() => req.destroy(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
      function fail(err: Error) {
        clearTimeout(timer);
        reject(err);
      }
      req.on('error', fail);
      req.end(body);
    });
  }
}

/**
 * The Standard Webhooks signature: `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body`, keyed by
 * the base64 part of the `whsec_` secret — what the `standardwebhooks` library computes (the tests
 * verify every notification with it), by node:crypto in a fifth of the time.
 */
function standardWebhooksSignature(secret: string, id: string, timestamp: string, body: string): string {
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** dns.lookup that refuses private, loopback and link-local answers (SSRF). */
const publicOnlyLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
    if (err) return callback(err, '', 0);
    const refused = addresses.find((a) => isPrivateAddress(a.address));
    if (refused)
      return callback(
        new Error(`${hostname} resolves to a private address (${refused.address}); refused`),
        '',
        0,
      );
    if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
    callback(null, addresses[0]!.address, addresses[0]!.family);
  });
};
