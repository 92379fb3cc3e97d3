import type { Readable } from 'node:stream';
import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { mustCloseAfterRefusal } from '../common/drain.js';
import { NotFound, problemResponse } from '../common/problem.js';
import { MethodNotAllowed } from './ingress-errors.js';
import { IngressService, type BodyRead } from './ingress.service.js';

/**
 * The ingress endpoints, registered straight on Fastify in their own scope: neither the API's JSON
 * parser nor its body limits apply; the body arrives as the raw stream, counted while it streams in.
 * Responses are problem+json like the API: the same ApiErrors, mapped by the same `problemResponse`.
 */
@Injectable()
export class IngressRoutes implements OnModuleInit {
  private readonly logger = new Logger('WebhookIngress');

  constructor(
    @Inject(HttpAdapterHost) private readonly host: HttpAdapterHost,
    @Inject(IngressService) private readonly ingress: IngressService,
  ) {}

  onModuleInit(): void {
    const fastify = this.host.httpAdapter.getInstance<FastifyInstance>();
    void fastify.register(async (scope) => {
      scope.removeAllContentTypeParsers();
      // Content-Type is not enforced: every body reaches the handler as the unread request stream.
      scope.addContentTypeParser('*', (_req, payload, done) => done(null, payload));
      scope.setErrorHandler((err, req, reply) => this.fail(req, reply, err));
      // Every other method the server routes (GET, HEAD, PUT, DELETE, PATCH, OPTIONS) gets a 405.
      const otherMethods = scope.supportedMethods.filter((m) => m !== 'POST');
      for (const url of ['/webhooks/w/:uid', '/webhooks/w/:uid/:token']) {
        scope.route({ method: 'POST', url, handler: (req, reply) => this.post(req, reply) });
        scope.route({
          method: otherMethods,
          url,
          exposeHeadRoute: false,
          config: { refusesOnly: true },
          handler: (req, reply) => this.fail(req, reply, new MethodNotAllowed()),
        });
      }
      // Deeper paths under the ingress: 404 here, so a URL token never echoes in a generic 404 body.
      scope.all('/webhooks/w/*', { config: { refusesOnly: true } }, (req, reply) =>
        this.fail(req, reply, new NotFound('No such webhook endpoint.')),
      );
    });
  }

  private async post(req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const { uid, token } = req.params as { uid: string; token?: string };
    const declared = Number(req.headers['content-length']);
    const deliveryId = await this.ingress.receive({
      uid,
      urlToken: token,
      headers: req.headers,
      clientAddress: req.ip,
      declaredLength: Number.isSafeInteger(declared) && declared >= 0 ? declared : undefined,
      readBody: (limit) => readBody(req.body as Readable | undefined, limit),
    });
    await reply
      .code(202)
      .header('Content-Type', 'application/json; charset=utf-8')
      .send({ delivery_id: deliveryId });
  }

  private fail(req: FastifyRequest, reply: FastifyReply, err: unknown): FastifyReply {
    const { uid } = (req.params ?? {}) as { uid?: string };
    const problem = problemResponse(err, {
      method: req.method,
      path: req.url.split('?')[0],
      // The instance names the webhook only: a url_token path is a credential.
      instance: uid ? `/webhooks/w/${uid}` : null,
      traceId: String(req.id),
    });
    if (problem.log) this.logger[problem.log.level]({ err, reqId: req.id }, problem.log.message);
    void reply.code(problem.status).headers(problem.headers);
    void mustCloseAfterRefusal(req.raw).then((close) => {
      if (close) void reply.header('Connection', 'close');
      void reply.send(problem.body);
    });
    return reply;
  }
}

/** Reads the body while counting; past `limit` it stops buffering and lets the rest drain unread. */
function readBody(stream: Readable | undefined, limit: number): Promise<BodyRead> {
  if (!stream) return Promise.resolve({ body: Buffer.alloc(0) });
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
      stream.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        stream.on('error', () => undefined);
        stream.resume();
        resolve({ tooLarge: size });
      } else chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve({ body: Buffer.concat(chunks, size) });
    };
    const onError = (err: Error) => {
      cleanup();
      reject(Object.assign(err, { statusCode: 400 }));
    };
    const onClose = () => {
      cleanup();
      reject(Object.assign(new Error('the client closed the connection mid-body'), { statusCode: 400 }));
    };
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onError);
    stream.on('close', onClose);
  });
}
