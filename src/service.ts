import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { Logger as NestLogger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { AppModule } from './app.module.js';
import type { Config } from './config/config.js';
import { openDatabase } from './database/data-source.js';
import { startDatabaseServer, type DatabaseServer } from './database/database-server.js';
import { Database } from './database/database.js';
import { httpTimeouts } from './config/http-timeouts.js';
import { HttpConnections } from './common/http-connections.js';
import { parseJsonBody } from './common/json-body.js';
import { applyBodyLimit, DEFAULT_BODY_LIMIT } from './common/route-config.js';
import { installLogging } from './logging.js';
import type { DestinationStream } from 'pino';
import { Metrics } from './common/metrics.js';
import { installOpenApi } from './openapi.js';

export interface RunningService {
  app: NestFastifyApplication;
  db: Database;
  /** e.g. http://127.0.0.1:8080 */
  url: string;
  databaseServer: DatabaseServer;
  /** Every route Fastify registered (method and URL pattern), e.g. for checking the OpenAPI document. */
  routes: Array<{ method: string; url: string }>;
  /**
   * Stops the workers, drains HTTP, closes the pool, then stops an embedded database: in that order,
   * telling `report` as each stage ends.
   */
  stop(report?: (stage: string) => void): Promise<void>;
}

/** Accepted from callers as a request id when it is short and plain; otherwise we make one. */
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export async function startService(
  config: Config,
  /** `logDestination`: where the log goes instead of stdout (installLogging). */
  opts: { logDestination?: DestinationStream } = {},
): Promise<RunningService> {
  const supervisor = new NestLogger('EmbeddedPostgres');
  const databaseServer = await startDatabaseServer(config, { notice: (m) => supervisor.warn(m) });
  const dataSource = await openDatabase(databaseServer.url);
  const db = Database.fromDataSource(dataSource);
  const adapter = new FastifyAdapter({
    // Each route's own limit where it declares one (@BodyLimit): see docs/run-api.md "Limits".
    bodyLimit: DEFAULT_BODY_LIMIT,
    ...httpTimeouts(config),
    genReqId: (req: IncomingMessage) => {
      const given = req.headers['x-request-id'];
      const id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
      (req as IncomingMessage & { id: string }).id = id;
      return id;
    },
  });
  const routes: RunningService['routes'] = [];
  adapter.getInstance().addHook('onRoute', (route) => {
    applyBodyLimit(route);
    // Routes that exist only to refuse (the ingress's 405s and deep-path 404s) are not operations,
    // nor are the dashboard's pages.
    const kind = route.config as { refusesOnly?: boolean; page?: boolean } | undefined;
    if (kind?.refusesOnly || kind?.page) return;
    for (const method of [route.method].flat()) routes.push({ method, url: route.url });
  });
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(config, db), adapter, {
    bufferLogs: true,
    rawBody: true,
  });
  installLogging(app, config, opts.logDestination);
  app.useBodyParser('application/json', {}, parseJsonBody);
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
  const connections = new HttpConnections(fastify.server);
  let report: (stage: string) => void = () => undefined;
  // NestJS stops the workers (beforeApplicationShutdown) before it closes HTTP: Fastify's close hooks
  // mark the end of both stages.
  fastify.addHook('preClose', (done) => {
    report('workers stopped');
    connections.drain();
    done();
  });
  fastify.addHook('onClose', (_instance, done) => {
    report('HTTP drained and closed');
    done();
  });
  installOpenApi(app);
  await app.listen(config.port, config.host);
  const address = fastify.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const host = config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host;

  let stopping: Promise<void> | undefined;
  const stop = (reportTo?: (stage: string) => void) =>
    (stopping ??= (async () => {
      if (reportTo) report = reportTo;
      await app.close();
      await dataSource.destroy().catch(() => undefined);
      await databaseServer.stop();
      report(databaseServer.embedded ? 'embedded PostgreSQL stopped' : 'database connections closed');
    })());
  return { app, db, url: `http://${host}:${port}`, databaseServer, routes, stop };
}
