import { newUid } from '../../src/common/ids.js';
import type { Database } from '../../src/database/database.js';
import { SecretsService } from '../../src/secrets/secrets.service.js';
import type { TestService } from './service.js';

/**
 * Applied definition state written straight into the tables the reconciler fills (factories, agents,
 * automations, webhooks) — what ingress tests need without a git repository.
 */
export interface FactoryFixture {
  id: string;
  uid: string;
  teamId: string;
}

export async function createFactory(
  t: TestService,
  opts: { teamId?: string; agentDefaults?: Record<string, unknown> } = {},
): Promise<FactoryFixture> {
  const teamId = opts.teamId ?? t.defaultTeam.id;
  const uid = newUid();
  const [row] = await t.service.db.query<{ id: string }>(
    `INSERT INTO factories (uid, team_id, name, repo_url, definition, ready)
     VALUES ($1, $2, $3, 'file:///dev/null', $4, true) RETURNING id`,
    [
      uid,
      teamId,
      `factory-${uid}`,
      { schemaVersion: 'v1alpha1', name: uid, agentDefaults: opts.agentDefaults ?? {} },
    ],
  );
  return { id: row!.id, uid, teamId };
}

export interface WebhookFixture {
  id: string;
  uid: string;
  secret: string;
  name: string;
}

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
  const secrets = t.service.app.get(SecretsService);
  const secretName = `wh-secret-${newUid().slice(0, 8)}`;
  const secret = opts.secret ?? newUid() + newUid();
  const ref = await secrets.set(factory.teamId, secretName, secret);
  const uid = newUid();
  const name = opts.name ?? `hook-${uid.slice(0, 6)}`;
  const [row] = await t.service.db.query<{ id: string }>(
    `INSERT INTO webhooks (uid, factory_id, team_id, name, path, auth_mode, signature_scheme, secret_name,
                           secret_version_id, delivery_id_header, enabled, deleted_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING id`,
    [
      uid,
      factory.id,
      factory.teamId,
      name,
      `webhooks/${name}.yaml`,
      opts.authMode ?? 'token',
      opts.scheme ?? null,
      secretName,
      ref.versionId,
      opts.deliveryIdHeader ?? null,
      opts.enabled ?? true,
      opts.deleted ? new Date() : null,
    ],
  );
  return { id: row!.id, uid, secret, name };
}

export async function createAgent(
  db: Database,
  factory: FactoryFixture,
  opts: {
    name: string;
    agentType?: 'FOREMAN' | 'CUSTOM';
    basePrompt?: string;
    overrides?: Record<string, unknown>;
  },
): Promise<void> {
  await db.execute(
    `INSERT INTO agents (factory_id, name, path, agent_type, overrides, base_prompt) VALUES ($1, $2, $3, $4, $5, $6)`,
    [
      factory.id,
      opts.name,
      `agents/${opts.name}/agent.md`,
      opts.agentType ?? 'CUSTOM',
      opts.overrides ?? {},
      opts.basePrompt ?? '',
    ],
  );
}

export async function createAutomation(
  db: Database,
  factory: FactoryFixture,
  opts: {
    name: string;
    webhookUid: string;
    payload?: Record<string, unknown>;
    prompt?: string;
    agent?: string;
    overrides?: Record<string, unknown>;
    enabled?: boolean;
  },
): Promise<string> {
  const filter: Record<string, unknown> = { webhook_ids: [opts.webhookUid] };
  if (opts.payload) filter.payload = opts.payload;
  const [row] = await db.query<{ id: string }>(
    `INSERT INTO automations (factory_id, name, path, enabled, agent_name, triggers, overrides, prompt)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
    [
      factory.id,
      opts.name,
      `automations/${opts.name}/automation.md`,
      opts.enabled ?? true,
      opts.agent ?? null,
      JSON.stringify([{ provider: 'webhook', event: 'received', filter }]),
      opts.overrides ?? {},
      opts.prompt ?? `Handle the ${opts.name} event.`,
    ],
  );
  return row!.id;
}

/** What the reconciler does after an apply commits: tell every replica. */
export async function announceApply(db: Database, factory: FactoryFixture): Promise<void> {
  await db.query(`SELECT pg_notify('factoryd_definitions_applied', $1)`, [factory.id]);
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
