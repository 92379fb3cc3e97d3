import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { socketOwner } from './socket-owner.js';

/** One POST the receiver got, its signature checked with the standardwebhooks library. */
export interface Received {
  id: string;
  /** When it arrived (ms since the epoch). */
  at: number;
  /** When the connection it came on was opened (ms since the epoch): which sender process it was. */
  connectedAt: number;
  /** The process that opened that connection, of the receiver's `senders` (undefined: none of them). */
  senderPid?: number;
  verified: boolean;
  body: { type: string; timestamp: string; data: Record<string, any> };
}

/** What the receiver does with a request: an HTTP status (now, or once a promise gives it), or 'hang' (never answers). */
export type Behaviour = (n: number, req: Received) => number | Promise<number> | 'hang';

/**
 * A real HTTP server on loopback that verifies every notification's Standard Webhooks signature
 * against `secret` (set once the endpoint is created) and answers as `behaviour` says.
 */
export class NotificationReceiver {
  readonly received: Received[] = [];
  secret = '';
  behaviour: Behaviour = () => 200;
  /** How long each answer takes (a receiver doing some work): attempts stay in flight meanwhile. */
  delayMs = 0;
  /**
   * The processes that may send (read at each new connection): each request's `senderPid` says which
   * one opened its connection (see socketOwner). Unset: not looked up.
   */
  senders?: () => ReadonlyArray<number | undefined>;
  private readonly opened = new WeakMap<object, { at: number; pid?: number }>();
  private readonly server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const headers = req.headers as Record<string, string>;
      let verified: boolean;
      try {
        new Webhook(this.secret).verify(raw, headers);
        verified = true;
      } catch {
        verified = false;
      }
      const got: Received = {
        id: headers['webhook-id'] ?? '',
        at: Date.now(),
        connectedAt: this.opened.get(req.socket)?.at ?? 0,
        senderPid: this.opened.get(req.socket)?.pid,
        verified,
        body: JSON.parse(raw),
      };
      this.received.push(got);
      const answer = this.behaviour(this.received.length, got);
      if (answer === 'hang') return;
      const reply = (status: number) =>
        res.writeHead(status, { 'content-type': 'text/plain' }).end(status < 300 ? 'ok' : `nope ${status}`);
      if (typeof answer !== 'number') void answer.then(reply);
      else if (this.delayMs) setTimeout(() => reply(answer), this.delayMs);
      else reply(answer);
    });
  });

  async start(): Promise<string> {
    this.server.on('connection', (socket) => {
      const senders = this.senders?.();
      this.opened.set(socket, {
        at: Date.now(),
        pid: senders && socketOwner(socket.remotePort!, socket.localPort!, senders),
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }

  ofRun(runId: string): Received[] {
    return this.received.filter((r) => r.body.data.run_id === runId);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
