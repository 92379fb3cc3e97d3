import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

/**
 * A git server over https on loopback: Node's https server in front of the real `git http-backend`
 * (CGI), with HTTP basic auth on every repository under `private/`. Its certificate is made for the
 * test (`caFile`: give it to git by GIT_SSL_CAINFO). It counts the fetches it served (an upload-pack
 * request that asks for objects), by repository.
 */
export class GitHttpServer {
  private server?: Server;
  private readonly dir = mkdtempSync(join(tmpdir(), 'factoryd-git-https-'));
  readonly caFile = join(this.dir, 'cert.pem');
  /** Fetches served, by repository path (e.g. `private/app.git`). */
  readonly fetches = new Map<string, number>();
  /** Requests refused for want of the right credentials. */
  refused = 0;
  url = '';

  constructor(
    /** The folder whose repositories it serves (`<root>/private/…` need the credentials). */
    private readonly root: string,
    private readonly credentials: { username: string; password: string },
  ) {}

  async start(): Promise<string> {
    selfSignedCertificate(join(this.dir, 'key.pem'), this.caFile);
    this.server = createServer(
      { key: readFileSync(join(this.dir, 'key.pem')), cert: readFileSync(this.caFile) },
      (req, res) => {
        const url = new URL(req.url ?? '/', 'https://127.0.0.1');
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const body = Buffer.concat(chunks);
          if (url.pathname.startsWith('/private/') && !this.authorized(req.headers.authorization)) {
            this.refused++;
            res.writeHead(401, { 'www-authenticate': 'Basic realm="git"' }).end();
            return;
          }
          if (req.method === 'POST' && url.pathname.endsWith('/git-upload-pack')) {
            const plain = req.headers['content-encoding'] === 'gzip' ? gunzipSync(body) : body;
            const text = plain.toString('latin1');
            // Protocol v2 says `command=fetch`; v0 sends `want` lines: either way objects were asked for.
            if (text.includes('command=fetch') || /^[0-9a-f]{4}want /m.test(text)) {
              const repo = url.pathname.slice(1, -'/git-upload-pack'.length);
              this.fetches.set(repo, (this.fetches.get(repo) ?? 0) + 1);
            }
          }
          const cgi = spawn('git', ['http-backend'], {
            env: {
              PATH: process.env.PATH,
              GIT_PROJECT_ROOT: this.root,
              GIT_HTTP_EXPORT_ALL: '1',
              REQUEST_METHOD: req.method,
              PATH_INFO: url.pathname,
              QUERY_STRING: url.search.slice(1),
              CONTENT_TYPE: req.headers['content-type'] ?? '',
              CONTENT_LENGTH: String(body.length),
              HTTP_CONTENT_ENCODING: String(req.headers['content-encoding'] ?? ''),
              GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
              REMOTE_USER: 'tester',
              REMOTE_ADDR: '127.0.0.1',
            },
          });
          const out: Buffer[] = [];
          cgi.stdout.on('data', (c: Buffer) => out.push(c));
          cgi.stdin.on('error', () => undefined);
          cgi.stdin.end(body);
          cgi.on('close', () => {
            const all = Buffer.concat(out);
            const split = all.indexOf('\r\n\r\n');
            const head = all.subarray(0, split).toString('latin1');
            const headers: Record<string, string> = {};
            let status = 200;
            for (const line of head.split('\r\n')) {
              const [name, ...value] = line.split(':');
              if (name!.toLowerCase() === 'status') status = Number(value.join(':').trim().split(' ')[0]);
              else headers[name!.toLowerCase()] = value.join(':').trim();
            }
            res.writeHead(status, headers).end(all.subarray(split + 4));
          });
        });
      },
    );
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `https://127.0.0.1:${(this.server!.address() as AddressInfo).port}`;
    return this.url;
  }

  private authorized(header: string | undefined): boolean {
    const given = header?.startsWith('Basic ') ? Buffer.from(header.slice(6), 'base64').toString() : '';
    return given === `${this.credentials.username}:${this.credentials.password}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A key and a self-signed certificate for 127.0.0.1, valid a day (git trusts it by GIT_SSL_CAINFO). */
export function selfSignedCertificate(keyFile: string, certFile: string): void {
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      keyFile,
      '-out',
      certFile,
    ],
    { stdio: 'ignore' },
  );
}
