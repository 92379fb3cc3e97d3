import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SIGNATURE_SCHEMES } from './index.js';
import type { SignedRequest } from './verifier.js';

const hex = (alg: string, key: string | Buffer, data: string | Buffer) =>
  createHmac(alg, key).update(data).digest('hex');
const b64 = (alg: string, key: string | Buffer, data: string | Buffer) =>
  createHmac(alg, key).update(data).digest('base64');

const NOW = new Date('2026-11-21T00:00:00Z');
const T = Math.floor(NOW.getTime() / 1000);
const req = (body: string | Buffer, headers: Record<string, string>, now = NOW): SignedRequest => ({
  body: Buffer.isBuffer(body) ? body : Buffer.from(body),
  headers,
  now,
});
const verify = async (scheme: string, secret: string, r: SignedRequest) =>
  SIGNATURE_SCHEMES[scheme]!.verify(secret, r);

describe('known answers from the providers’ published examples', () => {
  it('standard_webhooks: the Standard Webhooks libraries’ test vector', async () => {
    const headers = {
      'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
      'webhook-timestamp': '1614265330',
      'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    };
    const at = new Date(1614265330 * 1000);
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    expect(await verify('standard_webhooks', secret, req('{"test": 2432232314}', headers, at))).toEqual({
      ok: true,
    });
    const svix = Object.fromEntries(
      Object.entries(headers).map(([k, v]) => [k.replace('webhook', 'svix'), v]),
    );
    expect(await verify('standard_webhooks', secret, req('{"test": 2432232314}', svix, at))).toEqual({
      ok: true,
    });
    expect((await verify('standard_webhooks', secret, req('{"test": 2432232315}', headers, at))).ok).toBe(
      false,
    );
  });

  it('github: GitHub’s documented example', async () => {
    const headers = {
      'x-hub-signature-256': 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17',
    };
    expect(await verify('github', "It's a Secret to Everybody", req('Hello, World!', headers))).toEqual({
      ok: true,
    });
    expect((await verify('github', "It's a Secret to Everybody", req('Hello, World?', headers))).ok).toBe(
      false,
    );
  });
});

/** For every scheme: a correctly signed request for (secret, body, time), built independently of the verifier. */
const SWH_SECRET = 'whsec_' + Buffer.from('0123456789abcdef0123456789abcdef').toString('base64');
const SWH_KEY = Buffer.from('0123456789abcdef0123456789abcdef');
const signers: Record<string, { secret: string; sign(body: string, t: number): Record<string, string> }> = {
  standard_webhooks: {
    secret: SWH_SECRET,
    sign: (body, t) => ({
      'webhook-id': 'msg_1',
      'webhook-timestamp': String(t),
      'webhook-signature': `v1,${b64('sha256', SWH_KEY, `msg_1.${t}.${body}`)}`,
    }),
  },
  github: {
    secret: 's3cret',
    sign: (body) => ({ 'x-hub-signature-256': `sha256=${hex('sha256', 's3cret', body)}` }),
  },
  stripe: {
    secret: 'whsec_stripe',
    sign: (body, t) => ({ 'stripe-signature': `t=${t},v1=${hex('sha256', 'whsec_stripe', `${t}.${body}`)}` }),
  },
  slack: {
    secret: 'slacksecret',
    sign: (body, t) => ({
      'x-slack-request-timestamp': String(t),
      'x-slack-signature': `v0=${hex('sha256', 'slacksecret', `v0:${t}:${body}`)}`,
    }),
  },
  shopify: { secret: 'shp', sign: (body) => ({ 'x-shopify-hmac-sha256': b64('sha256', 'shp', body) }) },
  gitlab: { secret: 'gl-token', sign: () => ({ 'x-gitlab-token': 'gl-token' }) },
  linear: { secret: 'lin', sign: (body) => ({ 'linear-signature': hex('sha256', 'lin', body) }) },
  sentry: { secret: 'sen', sign: (body) => ({ 'sentry-hook-signature': hex('sha256', 'sen', body) }) },
  pagerduty: {
    secret: 'pd',
    sign: (body) => ({ 'x-pagerduty-signature': `v1=${hex('sha256', 'pd', body)}` }),
  },
  vercel: { secret: 'vc', sign: (body) => ({ 'x-vercel-signature': hex('sha1', 'vc', body) }) },
};
const TIMESTAMPED = ['standard_webhooks', 'stripe', 'slack'];

describe.each(Object.keys(signers))('%s', (scheme) => {
  const { secret, sign } = signers[scheme]!;
  const body = '{"action":"opened","n":1}';

  it('accepts a correctly signed request', async () => {
    expect(await verify(scheme, secret, req(body, sign(body, T)))).toEqual({ ok: true });
  });

  it('rejects the wrong secret', async () => {
    const wrong =
      scheme === 'standard_webhooks'
        ? 'whsec_' + Buffer.from('x'.repeat(32)).toString('base64')
        : secret + 'x';
    expect((await verify(scheme, wrong, req(body, sign(body, T)))).ok).toBe(false);
  });

  it('rejects one byte of the body changed (GitLab signs nothing: its token alone is checked)', async () => {
    const changed = await verify(scheme, secret, req(body.replace('1', '2'), sign(body, T)));
    expect(changed.ok).toBe(scheme === 'gitlab');
  });

  it('rejects missing and malformed headers', async () => {
    expect((await verify(scheme, secret, req(body, {}))).ok).toBe(false);
    const garbled = Object.fromEntries(Object.keys(sign(body, T)).map((k) => [k, 'garbage,=,v1=zz']));
    expect((await verify(scheme, secret, req(body, garbled))).ok).toBe(false);
  });
});

describe.each(TIMESTAMPED)('%s signs a timestamp', (scheme) => {
  const { secret, sign } = signers[scheme]!;
  const body = '{"action":"opened","n":1}';

  it('rejects stale and future timestamps, accepts within 5 minutes', async () => {
    expect((await verify(scheme, secret, req(body, sign(body, T - 301)))).ok).toBe(false);
    expect((await verify(scheme, secret, req(body, sign(body, T + 301)))).ok).toBe(false);
    expect((await verify(scheme, secret, req(body, sign(body, T - 299)))).ok).toBe(true);
    expect((await verify(scheme, secret, req(body, sign(body, T + 299)))).ok).toBe(true);
  });
});

describe('several signatures and unknown versions', () => {
  it('standard_webhooks: an unknown version next to a valid one passes; alone it fails', async () => {
    const h = signers.standard_webhooks!.sign('{}', T);
    const valid = h['webhook-signature']!;
    const both = { ...h, 'webhook-signature': `v2,AAAA ${valid}` };
    expect((await verify('standard_webhooks', SWH_SECRET, req('{}', both))).ok).toBe(true);
    const onlyUnknown = { ...h, 'webhook-signature': valid.replace('v1,', 'v2,') };
    expect((await verify('standard_webhooks', SWH_SECRET, req('{}', onlyUnknown))).ok).toBe(false);
  });

  it('stripe: a v0 next to a valid v1 passes; several v1 (one stale key) pass; a lone v0 fails', async () => {
    const good = hex('sha256', 'whsec_stripe', `${T}.{}`);
    const sig = (s: string) => ({ 'stripe-signature': s });
    expect((await verify('stripe', 'whsec_stripe', req('{}', sig(`t=${T},v0=abcd,v1=${good}`)))).ok).toBe(
      true,
    );
    expect(
      (await verify('stripe', 'whsec_stripe', req('{}', sig(`t=${T},v1=${'0'.repeat(64)},v1=${good}`)))).ok,
    ).toBe(true);
    expect((await verify('stripe', 'whsec_stripe', req('{}', sig(`t=${T},v0=${good}`)))).ok).toBe(false);
  });

  it('pagerduty: a v2 next to a valid v1 passes', async () => {
    const good = hex('sha256', 'pd', '{}');
    expect(
      (await verify('pagerduty', 'pd', req('{}', { 'x-pagerduty-signature': `v2=abc,v1=${good}` }))).ok,
    ).toBe(true);
    expect((await verify('pagerduty', 'pd', req('{}', { 'x-pagerduty-signature': `v2=${good}` }))).ok).toBe(
      false,
    );
  });

  it('linear: a signed webhookTimestamp older than 5 minutes is stale', async () => {
    const stale = JSON.stringify({ webhookTimestamp: NOW.getTime() - 301_000 });
    const fresh = JSON.stringify({ webhookTimestamp: NOW.getTime() - 60_000 });
    expect(
      (await verify('linear', 'lin', req(stale, { 'linear-signature': hex('sha256', 'lin', stale) }))).ok,
    ).toBe(false);
    expect(
      (await verify('linear', 'lin', req(fresh, { 'linear-signature': hex('sha256', 'lin', fresh) }))).ok,
    ).toBe(true);
  });

  it('signatures are checked over raw bytes: a body that is not UTF-8 still verifies for byte-level schemes', async () => {
    const raw = Buffer.from([0x7b, 0xff, 0x7d]);
    expect(
      (await verify('shopify', 'shp', req(raw, { 'x-shopify-hmac-sha256': b64('sha256', 'shp', raw) }))).ok,
    ).toBe(true);
    const tweaked = Buffer.from([0x7b, 0xfe, 0x7d]);
    expect(
      (await verify('shopify', 'shp', req(tweaked, { 'x-shopify-hmac-sha256': b64('sha256', 'shp', raw) })))
        .ok,
    ).toBe(false);
  });
});
