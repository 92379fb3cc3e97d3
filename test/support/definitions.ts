import { randomBytes } from 'node:crypto';
import { newUid } from '../../src/common/ids.js';
import type { Database } from '../../src/database/database.js';
import { formatError } from '../../src/definitions/definition.js';
import { DefinitionStore } from '../../src/reconciler/definition-store.js';
import { Reconciler } from '../../src/reconciler/reconciler.js';
import { SecretsService } from '../../src/secrets/secrets.service.js';
import { TestRepo } from './git-repo.js';
import type { TestService } from './service.js';

/**
 * Factories for ingress tests, applied the way a team's are: each fixture call writes the factory's
 * files in its own git repository (a temp folder), commits, and reconciles that commit. What the
 * tests read back (ids, UIDs, pinned secret versions) is what the reconciler wrote.
 */
export interface FactoryFixture {
  id: string;
  uid: string;
  teamId: string;
}

/** A fixture factory's repository, its service, and the fixture calls queued on it. */
interface Source {
  t: TestService;
  repo: TestRepo;
  queue: Promise<unknown>;
}
const sources = new WeakMap<FactoryFixture, Source>();
const repos = new Set<TestRepo>();
process.once('exit', () => repos.forEach((r) => r.remove()));

/** Commits `files` (null: removes) to the factory's repository and applies the commit, one call at a time. */
function commitAndApply(factory: FactoryFixture, files: Record<string, string | null>): Promise<void> {
  const source = sources.get(factory);
  if (!source) throw new Error('not a factory from createFactory()');
  const run = source.queue.then(async () => {
    const sha = source.repo.commit(files, 'fixture');
    const out = await source.t.service.app.get(Reconciler).request(factory.id, true);
    if (out.revision !== sha || (out.result !== 'applied' && out.result !== 'unchanged'))
      throw new Error(
        `fixture commit ${sha} did not apply (${out.result}): ${out.errors.map(formatError).join('; ')}`,
      );
  });
  source.queue = run.catch(() => undefined);
  return run;
}

const yaml = (fields: Record<string, unknown>) =>
  Object.entries(fields)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}: ${JSON.stringify(v)}\n`)
    .join('');
const markdown = (front: Record<string, unknown>, body: string) => `---\n${yaml(front)}---\n${body}\n`;

/** A registered factory with a factory.yaml and a foreman (agents/foreman), applied. */
export async function createFactory(
  t: TestService,
  opts: { teamId?: string; agentDefaults?: Record<string, unknown> } = {},
): Promise<FactoryFixture> {
  const teamId = opts.teamId ?? t.defaultTeam.id;
  const repo = new TestRepo();
  repos.add(repo);
  const name = `fixture-${randomBytes(6).toString('hex')}`;
  const f = await t.service.app
    .get(DefinitionStore)
    .register({ teamId, name, repoUrl: repo.dir, branch: 'main' });
  const factory = { id: f!.id, uid: f!.uid, teamId };
  sources.set(factory, { t, repo, queue: Promise.resolve() });
  await commitAndApply(factory, {
    'factory.yaml': yaml({ schemaVersion: 'v1alpha1', name, agentDefaults: opts.agentDefaults }),
    [FOREMAN]: markdown({ agentType: 'FOREMAN' }, 'You run the factory.'),
  });
  return factory;
}
const FOREMAN = 'agents/foreman/agent.md';

export interface WebhookFixture {
  id: string;
  uid: string;
  secret: string;
  name: string;
}

/** webhooks/<name>.yaml on a new team secret; `deleted`: applied, then its file removed (a tombstone). */
export async function createWebhook(
  t: TestService,
  factory: FactoryFixture,
  opts: {
    authMode?: 'token' | 'url_token' | 'signature';
    scheme?: string;
    secret?: string;
    deliveryIdHeader?: string;
    enabled?: boolean;
    deleted?: boolean;
    name?: string;
  } = {},
): Promise<WebhookFixture> {
  const secretName = `wh-secret-${newUid().slice(0, 8)}`;
  const secret = opts.secret ?? newUid() + newUid();
  await t.service.app.get(SecretsService).set(factory.teamId, secretName, secret);
  const name = opts.name ?? `hook-${newUid().slice(0, 6)}`;
  const path = `webhooks/${name}.yaml`;
  const content = yaml({
    authMode: opts.authMode ?? 'token',
    signatureScheme: opts.scheme,
    secretName,
    deliveryIdHeader: opts.deliveryIdHeader,
    enabled: opts.enabled,
  });
  await commitAndApply(factory, { [path]: content });
  const created = await webhookAt(t.service.db, factory, path);
  if (opts.deleted) await commitAndApply(factory, { [path]: null });
  return { ...created, secret, name };
}

/** Changes a webhook's file: another team secret (pinned at its current version), or enabled. */
export async function updateWebhook(
  t: TestService,
  factory: FactoryFixture,
  hook: WebhookFixture,
  change: { secretName?: string; enabled?: boolean },
): Promise<void> {
  const path = `webhooks/${hook.name}.yaml`;
  const [row] = await t.service.db.query<{
    auth_mode: string;
    signature_scheme: string | null;
    secret_name: string;
    delivery_id_header: string | null;
    enabled: boolean;
  }>(
    `SELECT auth_mode, signature_scheme, secret_name, delivery_id_header, enabled FROM webhooks WHERE id = $1`,
    [hook.id],
  );
  const content = yaml({
    authMode: row.auth_mode,
    signatureScheme: row.signature_scheme ?? undefined,
    secretName: change.secretName ?? row.secret_name,
    deliveryIdHeader: row.delivery_id_header ?? undefined,
    enabled: change.enabled ?? row.enabled,
  });
  await commitAndApply(factory, { [path]: content });
}

async function webhookAt(
  db: Database,
  factory: FactoryFixture,
  path: string,
): Promise<{ id: string; uid: string }> {
  const [row] = await db.query<{ id: string; uid: string }>(
    `SELECT id, uid FROM webhooks WHERE factory_id = $1 AND path = $2 AND deleted_at IS NULL`,
    [factory.id, path],
  );
  return row!;
}

/** agents/<name>/agent.md; a FOREMAN replaces the factory's first foreman. */
export async function createAgent(
  t: TestService,
  factory: FactoryFixture,
  opts: {
    name: string;
    agentType?: 'FOREMAN' | 'CUSTOM';
    basePrompt?: string;
    overrides?: Record<string, unknown>;
  },
): Promise<void> {
  const files: Record<string, string | null> = {
    [`agents/${opts.name}/agent.md`]: markdown(
      { agentType: opts.agentType, overrides: opts.overrides },
      opts.basePrompt ?? '',
    ),
  };
  if (opts.agentType === 'FOREMAN' && opts.name !== 'foreman') files[FOREMAN] = null;
  await commitAndApply(factory, files);
}

/** automations/<name>/automation.md with one webhook trigger; returns the automation's id. */
export async function createAutomation(
  t: TestService,
  factory: FactoryFixture,
  opts: {
    name: string;
    webhookUid: string;
    payload?: Record<string, unknown>;
    headers?: Record<string, unknown>;
    prompt?: string;
    agent?: string;
    overrides?: Record<string, unknown>;
    enabled?: boolean;
  },
): Promise<string> {
  const path = `automations/${opts.name}/automation.md`;
  const filter: Record<string, unknown> = { webhook_ids: [opts.webhookUid] };
  if (opts.payload) filter.payload = opts.payload;
  if (opts.headers) filter.headers = opts.headers;
  const content = markdown(
    {
      enabled: opts.enabled,
      agent: opts.agent,
      overrides: opts.overrides,
      triggers: [{ provider: 'webhook', event: 'received', filter }],
    },
    opts.prompt ?? `Handle the ${opts.name} event.`,
  );
  await commitAndApply(factory, { [path]: content });
  const [row] = await t.service.db.query<{ id: string }>(
    `SELECT id FROM automations WHERE factory_id = $1 AND path = $2`,
    [factory.id, path],
  );
  return row!.id;
}

/** POSTs raw bytes to the ingress; returns status, parsed body and headers. */
export async function deliver(
  url: string,
  path: string,
  body: string | Buffer,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(`${url}${path}`, { method: 'POST', headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    /* keep text */
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

export async function deliveriesOf(db: Database, webhookId: string) {
  return db.query<{
    id: string;
    status: string;
    identity: string | null;
    size_bytes: string | null;
    headers: Record<string, string>;
    payload: string | null;
    client_address: string;
  }>(
    `SELECT id, status, identity, size_bytes, headers, payload, client_address FROM deliveries WHERE webhook_id = $1 ORDER BY received_at, id`,
    [webhookId],
  );
}
