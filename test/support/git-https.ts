import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { selfSignedCertificate } from './git-http-server.js';
import type { TestRepo } from './git-repo.js';

/**
 * Serves a repository over HTTPS on loopback as a hosted one is: git's own `http-backend` (smart
 * HTTP), behind Basic authentication, with a self-signed certificate (`caFile`, for GIT_SSL_CAINFO).
 * `onAuthorized` runs while git waits for an answer: the moment a fetch is in flight.
 */
export async function serveOverHttps(
  repo: TestRepo,
  account: { username: string; password: string },
  onAuthorized: () => void = () => undefined,
): Promise<{ url: string; caFile: string; seen: string[]; stop(): void }> {
  const certs = mkdtempSync(join(tmpdir(), 'factoryd-https-'));
  const [key, cert] = [join(certs, 'key.pem'), join(certs, 'cert.pem')];
  selfSignedCertificate(key, cert);
  const expected = `Basic ${Buffer.from(`${account.username}:${account.password}`).toString('base64')}`;
  const seen: string[] = [];
  const server = createServer({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => {
    const auth = req.headers.authorization;
    seen.push(auth ? Buffer.from(auth.replace(/^Basic /, ''), 'base64').toString() : '(none)');
    if (auth !== expected) {
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="git"' }).end();
      return;
    }
    onAuthorized();
    const url = new URL(req.url!, 'https://127.0.0.1');
    const cgi = spawn('git', ['http-backend'], {
      env: {
        ...process.env,
        GIT_PROJECT_ROOT: dirname(repo.dir),
        GIT_HTTP_EXPORT_ALL: '1',
        PATH_INFO: url.pathname,
        QUERY_STRING: url.search.slice(1),
        REQUEST_METHOD: req.method,
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
        REMOTE_USER: account.username,
      },
    });
    req.pipe(cgi.stdin);
    const out: Buffer[] = [];
    cgi.stdout.on('data', (c: Buffer) => out.push(c));
    cgi.on('close', () => {
      const all = Buffer.concat(out);
      const end = all.indexOf('\r\n\r\n');
      const headers = Object.fromEntries(
        all
          .subarray(0, end)
          .toString()
          .split('\r\n')
          .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]),
      );
      const status = Number(/^\d+/.exec(headers.Status ?? '200')![0]);
      delete headers.Status;
      res.writeHead(status, headers).end(all.subarray(end + 4));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://127.0.0.1:${port}/${basename(repo.dir)}`,
    caFile: cert,
    seen,
    stop: () => {
      server.close();
      rmSync(certs, { recursive: true, force: true });
    },
  };
}
