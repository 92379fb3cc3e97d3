import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from './support/cli.js';
import {
  createAutomation,
  createFactory,
  createWebhook,
  deliver,
  type FactoryFixture,
  type WebhookFixture,
} from './support/definitions.js';
import { startTestService, type TestService } from './support/service.js';

/**
 * `factoryd webhooks deliveries … --status/--since/--payload-contains`, `webhooks replay` and
 * `webhooks test-filter` with a header filter, driven as a person would from a shell.
 */
describe('factoryd webhooks: search, replay, header filters (spawned)', () => {
  let t: TestService;
  let factory: FactoryFixture;
  let hook: WebhookFixture;
  let env: Record<string, string>;
  const cli = (args: string[], key?: string) =>
    runCli(args, { env: { ...env, ...(key ? { FACTORYD_API_KEY: key } : {}) } });
  const json = async (args: string[]) => {
    const r = await cli([...args, '--json']);
    expect(r.code, `factoryd ${args.join(' ')}: ${r.stderr}`).toBe(0);
    return JSON.parse(r.stdout);
  };

  beforeAll(async () => {
    t = await startTestService();
    env = { FACTORYD_API_URL: t.url, FACTORYD_API_KEY: t.adminKey, LOG_LEVEL: 'silent' };
    factory = await createFactory(t);
    hook = await createWebhook(t, factory);
    const send = (body: unknown, event: string) =>
      deliver(t.url, `/webhooks/w/${hook.uid}`, JSON.stringify(body), {
        authorization: `Bearer ${hook.secret}`,
        'X-GitHub-Event': event,
      });
    await send({ level: 'info' }, 'push');
    await send({ level: 'error', job: 'build' }, 'pull_request');
    await send({ level: 'error', job: 'deploy' }, 'push');
  });
  afterAll(async () => t?.stop());

  it('deliveries --payload-contains / --status / --since search the log', async () => {
    const errors = await json([
      'webhooks',
      'deliveries',
      hook.uid,
      '--payload-contains',
      '{"level":"error"}',
    ]);
    expect(errors.deliveries).toHaveLength(2);
    const table = await cli(['webhooks', 'deliveries', hook.uid, '--payload-contains', '{"job":"deploy"}']);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout.trim().split('\n')).toHaveLength(2); // the header and one row
    expect(table.stdout).toContain(errors.deliveries[0].id);

    const since = errors.deliveries[1].received_at;
    const later = await json(['webhooks', 'deliveries', hook.uid, '--status', 'accepted', '--since', since]);
    expect(later.deliveries.map((d: { id: string }) => d.id)).toEqual(
      errors.deliveries.map((d: { id: string }) => d.id),
    );
    const bad = await cli(['webhooks', 'deliveries', hook.uid, '--since', 'yesterday']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('received_after must be an RFC 3339 timestamp');
  });

  it('replay UID ENTRY_ID starts the runs of today’s automations; another team gets 404', async () => {
    const [newest] = (await json(['webhooks', 'deliveries', hook.uid])).deliveries;
    await createAutomation(t, factory, {
      name: 'pushes',
      webhookUid: hook.uid,
      headers: { 'X-GitHub-Event': ['push'] },
    });
    const replayed = await cli(['webhooks', 'replay', hook.uid, newest.id]);
    expect(replayed.code, replayed.stderr).toBe(0);
    expect(replayed.stdout).toMatch(
      new RegExp(`^Replayed entry ${newest.id} as [0-9a-f-]{36}: 1 run started\\.`),
    );
    expect(replayed.stdout).toMatch(/^Status\s+Replayed$/m);
    expect(replayed.stdout).toContain(`Replay of  ${newest.id}`);

    const other = await t.newTeam('cli-attackers');
    const refused = await cli(['webhooks', 'replay', hook.uid, newest.id], other.key);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/404 resource_not_found/);
    const searched = await cli(['webhooks', 'deliveries', hook.uid, '--payload-contains', '{}'], other.key);
    expect(searched.code).toBe(1);
    expect(searched.stderr).toMatch(/404 resource_not_found/);
  });

  it('test-filter shows each header path and its outcome', async () => {
    const [newest] = (await json(['webhooks', 'deliveries', hook.uid, '--status', 'accepted'])).deliveries;
    const pr = (await json(['webhooks', 'deliveries', hook.uid, '--payload-contains', '{"job":"build"}']))
      .deliveries[0];
    const yes = await cli([
      'webhooks',
      'test-filter',
      hook.uid,
      '--automation',
      'pushes',
      '--delivery',
      newest.id,
    ]);
    expect(yes.code, yes.stderr).toBe(0);
    expect(yes.stdout).toMatch(/^Would trigger$/m);
    expect(yes.stdout).toMatch(/^x-github-event\s+pass\s+-\s+-\s+"push"$/m);
    const no = await cli([
      'webhooks',
      'test-filter',
      hook.uid,
      '--automation',
      'pushes',
      '--delivery',
      pr.id,
    ]);
    expect(no.stdout).toMatch(/^Would not trigger$/m);
    expect(no.stdout).toMatch(/^Header check\s+FAIL\s+1 header of the header filter fails: x-github-event$/m);
    expect(no.stdout).toMatch(/^x-github-event\s+FAIL\s+in\s+\["push"\]\s+"pull_request"$/m);
  });
});
