import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join, relative } from 'node:path';
import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { fromRoot } from '../common/paths.js';
import { NotFound, problemResponse } from '../common/problem.js';

/** Where `npm run build` (vite build) writes the dashboard. */
export const DASHBOARD_DIR = fromRoot('dist', 'web');
/** The dashboard's path prefix; `/` redirects here. */
const DASHBOARD_PATH = '/ui';

/**
 * No inline script or style, nothing from another origin: payloads, prompts and names the pages
 * show are hostile input, and this is the second wall behind rendering them as text.
 */
const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
};

interface Asset {
  body: Buffer;
  /** The body gzipped once at start, when that saves bytes (scripts and styles shrink to a third). */
  gzipped?: Buffer;
  type: string;
  etag: string;
}

/**
 * Serves the built dashboard from memory (a few files, read once at start): hashed assets cached for
 * a year, the page itself revalidated each time, and every other path under /ui answered with the page
 * so deep links (/ui/runs/<id>) load the app. The routes are registered on Fastify beside the API's;
 * they own /ui and / only, so /api, /webhooks, /metrics and /healthz are untouched.
 */
@Injectable()
export class DashboardPages implements OnModuleInit {
  private assets = new Map<string, Asset>();

  constructor(@Inject(HttpAdapterHost) private readonly host: HttpAdapterHost) {}

  onModuleInit(): void {
    this.assets = loadAssets(DASHBOARD_DIR);
    const fastify = this.host.httpAdapter.getInstance<FastifyInstance>();
    // `page`: not an API operation (kept out of the OpenAPI route check).
    const config = { page: true };
    fastify.get('/', { config }, (_req, reply) => reply.redirect(`${DASHBOARD_PATH}/`, 302));
    fastify.get(DASHBOARD_PATH, { config }, (_req, reply) => reply.redirect(`${DASHBOARD_PATH}/`, 301));
    fastify.get(`${DASHBOARD_PATH}/*`, { config }, (req, reply) => this.serve(req, reply));
  }

  private serve(req: FastifyRequest, reply: FastifyReply) {
    // The rest of the path after /ui/, decoded by the router (a malformed escape is its 400).
    const path = (req.params as { '*': string })['*'];
    void reply
      .header('Content-Security-Policy', DASHBOARD_CSP)
      .header('X-Content-Type-Options', 'nosniff')
      .header('Referrer-Policy', 'no-referrer')
      .header('X-Frame-Options', 'DENY');
    const page = this.assets.get('index.html');
    if (!page) {
      return answerProblem(
        req,
        reply,
        new NotFound(
          'The dashboard is not built here: run `npm run build` (npm start does it), then restart.',
        ),
      );
    }
    const asset = this.assets.get(path);
    // A missing file under assets/ is a 404, never the page: a browser must not run HTML as a script.
    if (!asset && path.startsWith('assets/')) {
      return answerProblem(req, reply, new NotFound(`no dashboard file ${path}`));
    }
    const served = asset ?? page;
    const immutable = asset !== undefined && path.startsWith('assets/');
    void reply
      .header('Cache-Control', immutable ? 'public, max-age=31536000, immutable' : 'no-cache')
      .header('ETag', served.etag)
      .type(served.type);
    if (req.headers['if-none-match'] === served.etag) return reply.code(304).send();
    if (!served.gzipped) return reply.send(served.body);
    void reply.header('Vary', 'Accept-Encoding');
    if (!/\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''))) return reply.send(served.body);
    return reply.header('Content-Encoding', 'gzip').send(served.gzipped);
  }
}

function loadAssets(dir: string): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  if (!existsSync(dir)) return assets;
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = join(entry.parentPath, entry.name);
    const body = readFileSync(file);
    const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
    const type = TYPES[extname(file)] ?? 'application/octet-stream';
    const gzipped = gzipSync(body, { level: 9 });
    assets.set(relative(dir, file).split('\\').join('/'), {
      body,
      type,
      etag,
      ...(gzipped.length < body.length * 0.9 ? { gzipped } : {}),
    });
  }
  return assets;
}

/** An error as problem+json, through the one mapping the API and the ingress use. */
function answerProblem(req: FastifyRequest, reply: FastifyReply, err: unknown) {
  const answer = problemResponse(err, { method: req.method, path: req.url.split('?')[0]!, traceId: req.id });
  return reply.code(answer.status).headers(answer.headers).send(answer.body);
}
