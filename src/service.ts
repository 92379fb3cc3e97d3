import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { Logger as NestLogger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Logger } from 'nestjs-pino';
import { AppModule } from './app.module.js';
import type { Config } from './config/config.js';
import { openDatabase } from './database/data-source.js';
import { startDatabaseServer, type DatabaseServer } from './database/database-server.js';
import { Database } from './database/database.js';
import { Metrics } from './ops/metrics.js';
import { installOpenApi } from './openapi.js';

export interface RunningService {
  app: NestFastifyApplication;
  db: Database;
  /** e.g. http://127.0.0.1:8080 */
  url: string;
  databaseServer: DatabaseServer;
  /** Every route Fastify registered (method and URL pattern), e.g. for checking the OpenAPI document. */
  routes: Array<{ method: string; url: string }>;
  /** Drains HTTP, closes the pool, then stops an embedded database: in that order. */
  stop(): Promise<void>;
}

/** Accepted from callers as a request id when it is short and plain; otherwise we make one. */
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/** Large enough for ten 1 MiB attachments in base64. */
const API_BODY_LIMIT = 16 * 1024 * 1024;

export async function startService(config: Config): Promise<RunningService> {
  const supervisor = new NestLogger('EmbeddedPostgres');
  const databaseServer = await startDatabaseServer(config, { notice: (m) => supervisor.warn(m) });
  const dataSource = await openDatabase(databaseServer.url);
  const db = Database.fromDataSource(dataSource);
  const adapter = new FastifyAdapter({
    bodyLimit: API_BODY_LIMIT,
    genReqId: (req: IncomingMessage) => {
      const given = req.headers['x-request-id'];
      const id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
      (req as IncomingMessage & { id: string }).id = id;
      return id;
    },
  });
  const routes: RunningService['routes'] = [];
  adapter.getInstance().addHook('onRoute', (route) => {
    // Routes that exist only to refuse (the ingress's 405s and deep-path 404s) are not operations.
    if ((route.config as { refusesOnly?: boolean } | undefined)?.refusesOnly) return;
    for (const method of [route.method].flat()) routes.push({ method, url: route.url });
  });
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(config, db), adapter, {
    bufferLogs: true,
    rawBody: true,
  });
  app.useLogger(app.get(Logger));
  const metrics = app.get(Metrics);
  const fastify = app.getHttpAdapter().getInstance();
  fastify.addHook('onSend', async (req, reply) => {
    reply.header('X-Request-Id', req.id);
  });
  fastify.addHook('onResponse', async (req, reply) => {
    metrics.httpDuration
      .labels(req.method, req.routeOptions.url ?? 'unmatched', String(reply.statusCode))
      .observe(reply.elapsedTime / 1000);
  });
  installOpenApi(app);
  await app.listen(config.port, config.host);
  const address = fastify.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const host = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await app.close();
      await dataSource.destroy().catch(() => undefined);
      await databaseServer.stop();
    })());
  return { app, db, url: `http://${host}:${port}`, databaseServer, routes, stop };
}
