// The dashboard's first paint on a fresh start: the bytes a cold browser downloads for /ui/ and the
// time until the sign-in form can be typed into, in headless Chromium (Debian's `chromium`), each
// visit in a new browser context (empty cache). Also the signed-in runs page until its list shows.
// Baseline in the same run: a bare navigation to /healthz on the same server, in the same browser
// (the floor any page pays: connection, request, an empty document). Prints medians and the ratio.
//
//   npm run build && node bench/dashboard.bench.js        (embedded PostgreSQL in a temp folder)
//   DATABASE_URL=postgres://… VISITS=20 node bench/dashboard.bench.js
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { chromium } from 'playwright-core';
import { AuthRepository } from '../dist/auth/auth.repository.js';
import { AuthService } from '../dist/auth/auth.service.js';
import { bootstrapDefaultTeam } from '../dist/auth/bootstrap.js';
import { loadConfig } from '../dist/config/config.js';
import { startService } from '../dist/service.js';
import { benchDatabase } from './ingress-kit.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const VISITS = Number(process.env.VISITS ?? 10);
const log = (line) => process.stdout.write(`${line}\n`);

if (!existsSync(CHROMIUM)) {
  log(`skipped: no browser at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`);
  process.exit(0);
}

const database = await benchDatabase({ durable: false });
const service = await startService(
  loadConfig({
    PORT: '0',
    LOG_LEVEL: 'error',
    DATA_DIR: join(database.dir, 'data'),
    DATABASE_URL: database.url,
    WORKER_CONCURRENCY: '0',
  }),
);
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});

try {
  const authRepo = new AuthRepository(service.db);
  const key = await bootstrapDefaultTeam(authRepo, new AuthService(authRepo));
  const base = service.url;

  /** One cold visit: a new context (empty cache), `ready` awaited; the ms it took and the bytes. */
  async function visit(path, ready, before) {
    const context = await browser.newContext();
    const page = await context.newPage();
    let bytes = 0;
    let wire = 0;
    page.on('requestfinished', async (req) => {
      const sizes = await req.sizes().catch(() => undefined);
      const body = await (await req.response())?.body().catch(() => undefined);
      wire += (sizes?.responseBodySize ?? 0) + (sizes?.responseHeadersSize ?? 0);
      bytes += body?.length ?? 0;
    });
    if (before) await before(page);
    const start = performance.now();
    await page.goto(`${base}${path}`);
    await ready(page);
    const ms = performance.now() - start;
    const fcp = await page.evaluate(
      () => performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null,
    );
    await page.waitForLoadState('networkidle');
    await context.close();
    return { ms, bytes, wire, fcp };
  }

  const signInReady = (page) => page.waitForSelector('input[name="api-key"]:not([disabled])');
  const runsReady = (page) => page.waitForSelector('text=No runs yet');
  const withKey = (page) =>
    page.addInitScript((k) => {
      const session = {
        key: k,
        team: { uid: 'x', name: 'default' },
        teams: [{ uid: 'x', name: 'default' }],
        scopes: ['runs:read', 'runs:write'],
        principal: { type: 'service_account', uid: 'x', display_name: 'bench' },
      };
      globalThis.sessionStorage.setItem('factoryd.session', JSON.stringify(session));
    }, key);

  const cases = [
    ['baseline: GET /healthz (an empty page)', '/healthz', (p) => p.waitForLoadState('load')],
    ['dashboard: /ui/ until the sign-in form takes input', '/ui/', signInReady],
    ['dashboard: /ui/runs signed in, until the list shows', '/ui/runs', runsReady, withKey],
  ];
  for (const [, path, ready, before] of cases) await visit(path, ready, before); // warm the server
  const results = [];
  for (const [name, path, ready, before] of cases) {
    const runs = [];
    for (let i = 0; i < VISITS; i++) runs.push(await visit(path, ready, before));
    results.push({ name, runs });
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  log(`Chromium ${browser.version()}, ${VISITS} cold visits each (new context, empty cache)`);
  const baseline = median(results[0].runs.map((r) => r.ms));
  for (const { name, runs } of results) {
    const ms = median(runs.map((r) => r.ms));
    const fcp = median(runs.map((r) => r.fcp ?? 0));
    const { bytes, wire } = runs[0];
    log(
      `${name}\n  time to interactive p50 ${ms.toFixed(1)} ms (first contentful paint ${fcp.toFixed(1)} ms), ` +
        `${wire.toLocaleString('en-US')} bytes over the wire with headers (${bytes.toLocaleString('en-US')} decoded), ` +
        `ratio to baseline ${(ms / baseline).toFixed(2)}×`,
    );
  }
} finally {
  await browser.close();
  await service.stop();
  await database.drop();
}
