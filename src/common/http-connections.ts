import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/**
 * The HTTP server's connections during a stop. `server.close()` closes the connections idle at that
 * moment and stops Node's timeout checks; a connection that was answering a request then stays open
 * as keep-alive after its answer, and one that has sent nothing yet stays too, until the client
 * leaves (undici: about 70 s) — the stop waits for all of them. Once draining, every connection
 * closes as soon as it carries no response: answers in flight still go out whole (no 202 is lost),
 * and nothing waits on a client.
 */
export class HttpConnections {
  /** Each open connection and the responses it is carrying. */
  private readonly open = new Map<Socket, number>();
  private draining = false;

  constructor(server: Server) {
    server.on('connection', (socket: Socket) => {
      if (this.draining) return socket.destroy();
      this.open.set(socket, 0);
      socket.once('close', () => this.open.delete(socket));
    });
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const socket = req.socket;
      this.open.set(socket, (this.open.get(socket) ?? 0) + 1);
      res.once('close', () => {
        const left = (this.open.get(socket) ?? 1) - 1;
        this.open.set(socket, left);
        if (this.draining && left === 0) socket.end();
      });
    });
  }

  /** The service is stopping: close what carries no response now, the rest once answered. */
  drain(): void {
    this.draining = true;
    for (const [socket, responses] of this.open) if (responses === 0) socket.end();
  }
}
