import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DefinitionStore } from '../src/reconciler/definition-store.js';
import { ReconcileScheduler } from '../src/reconciler/reconcile-scheduler.js';
import { Reconciler } from '../src/reconciler/reconciler.js';
import { SecretsService } from '../src/secrets/secrets.service.js';
import { deliver } from './support/definitions.js';
import { eventually } from './support/eventually.js';
import { automation, baseFactory, TestRepo } from './support/git-repo.js';
import { NotificationReceiver } from './support/notification-receiver.js';
import { startTestService, type TestService } from './support/service.js';

// notifications/<name>.yaml in a real git repository, applied by the real reconciler; notifications
// signed with the team secret the file names, to a real receiver on loopback.
let t: TestService;
let repo: TestRepo;
let reconciler: Reconciler;
let factoryId: string;
let factoryUid: string;
const receiver = new NotificationReceiver();
let receiverUrl: string;

beforeAll(async () => {
  t = await startTestService({ NOTIFICATIONS_ALLOW_PRIVATE_URLS: 'true', FACTORY_POLL_SECONDS: '3600' });
  reconciler = t.service.app.get(Reconciler);
  const secrets = t.service.app.get(SecretsService);
  await t.service.app.get(ReconcileScheduler).firstPoll;
  await secrets.set(t.defaultTeam.id, 'hook-secret', 'first-value');
  receiver.secret = (await secrets.generate(t.defaultTeam.id, 'notify-secret', 'whsec')).value;
  await secrets.set(t.defaultTeam.id, 'plain-secret', 'not-a-whsec');
  repo = new TestRepo();
  const f = await t.service.app
    .get(DefinitionStore)
    .register({ teamId: t.defaultTeam.id, name: 'notify-factory', repoUrl: repo.dir, branch: 'main' });
  factoryId = f!.id;
  factoryUid = f!.uid;
  receiverUrl = await receiver.start();
});
afterAll(async () => {
  await receiver.stop();
  await t?.stop();
  repo?.remove();
});

const endpoints = async () =>
  (await t.call('GET', '/api/v1/notifications/endpoints')).body.endpoints as Array<Record<string, any>>;

describe('notifications/<name>.yaml', () => {
  it('applies into an endpoint the factory owns, signed with the named team secret', async () => {
    const file = `url: ${receiverUrl}\nevents: [delivery.accepted, run.queued]\nsecretName: notify-secret\n`;
    repo.commit({ ...baseFactory(), 'notifications/ops.yaml': file });
    const out = await reconciler.request(factoryId);
    expect(out.errors).toEqual([]);
    const [ops] = (await endpoints()).filter((e) => e.name === 'ops');
    expect(ops).toMatchObject({ url: receiverUrl, managed_by_factory: true, enabled: true });
    expect(ops!.event_types).toEqual(['delivery.accepted', 'run.queued']);
    // The file is the source of truth: the API refuses to change it.
    const patch = await t.call('PATCH', `/api/v1/notifications/endpoints/${ops!.id}`, {
      url: 'http://127.0.0.1:1/',
    });
    expect(patch.status).toBe(409);
    expect(patch.body.detail).toContain('notifications/ops.yaml');

    const hooks = (await t.call('GET', `/api/v1/factory/${factoryUid}/webhooks`)).body.webhooks;
    const ci = hooks[0].uid as string;
    repo.commit({ 'automations/fix/automation.md': automation(ci) });
    expect((await reconciler.request(factoryId)).errors).toEqual([]);
    const sent = await deliver(t.url, `/webhooks/w/${ci}`, '{"action":"opened"}', {
      authorization: 'Bearer first-value',
    });
    expect(sent.status).toBe(202);
    const got = await eventually(
      () => (receiver.received.length >= 2 ? receiver.received : undefined),
      'the delivery and its run notified',
    );
    expect(got.every((r) => r.verified)).toBe(true);
    expect(got.map((r) => r.body.type).sort()).toEqual(['delivery.accepted', 'run.queued']);
    expect(got.find((r) => r.body.type === 'delivery.accepted')!.body.data.webhook_uid).toBe(ci);
  });

  it('refuses a bad file with file:line reasons, and keeps the last good endpoint', async () => {
    repo.commit({
      'notifications/bad.yaml': `url: ftp://example.com/\nsecretName: plain-secret\ncolour: blue\n`,
      'notifications/nosecret.yaml': `url: https://example.com/\nsecretName: missing-secret\n`,
    });
    const out = await reconciler.request(factoryId);
    expect(out.result).toBe('failed');
    expect(out.errors).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: 'notifications/bad.yaml', line: 3 }),
        expect.objectContaining({
          path: 'notifications/nosecret.yaml',
          line: 2,
          message: expect.stringMatching(/missing-secret/),
        }),
      ]),
    );
    repo.commit({
      'notifications/bad.yaml': `url: ftp://example.com/\nsecretName: plain-secret\n`,
      'notifications/nosecret.yaml': null,
    });
    const again = await reconciler.request(factoryId);
    expect(again.errors).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          path: 'notifications/bad.yaml',
          line: 1,
          message: expect.stringMatching(/http/),
        }),
        expect.objectContaining({
          path: 'notifications/bad.yaml',
          line: 2,
          message: expect.stringMatching(/whsec/),
        }),
      ]),
    );
    expect((await endpoints()).map((e) => e.name)).toContain('ops');
  });

  it('removing the file deletes the endpoint', async () => {
    repo.commit({ 'notifications/bad.yaml': null, 'notifications/ops.yaml': null });
    const out = await reconciler.request(factoryId);
    expect(out.errors).toEqual([]);
    expect((await endpoints()).map((e) => e.name)).not.toContain('ops');
  });
});
