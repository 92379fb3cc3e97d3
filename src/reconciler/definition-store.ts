import { Inject, Injectable, Optional } from '@nestjs/common';
import { newUid } from '../common/ids.js';
import { CHANNELS } from '../database/channels.js';
import { Database, type Queryable } from '../database/database.js';
import { Notifications } from '../database/notifications.js';
import type { DefinitionError, FactoryDefinition } from '../definitions/definition.js';
import { HELD_UNLESS_IN_FLIGHT } from '../notifications/notifications.repository.js';
import { fieldsOf, type AppliedState, type AppliedWebhook, type Plan, type PlanSummary } from './plan.js';

export interface FactoryRecord {
  id: string;
  uid: string;
  teamId: string;
  teamName: string;
  teamUid: string;
  name: string;
  repoUrl: string;
  /** The team secret holding the repository's credentials (repository-credentials.ts), if it needs any. */
  repoCredentialsSecret: string | null;
  branch: string;
  managed: boolean;
  description: string | null;
  definition: Record<string, unknown> | null;
  lastAttemptedRevision: string | null;
  lastAppliedRevision: string | null;
  ready: boolean;
  reason: StatusReason | null;
  message: string | null;
  createdAt: Date;
  updatedAt: Date;
}

/** The other columns of a definition row: its file's fields, compared as they are. */
type Columns = Record<string, unknown>;

/** A definition row of the applied state: what identifies it, and its file's fields. */
type AppliedRow = { id: string; path: string; name: string; deleted: boolean } & Columns;

export type ApplyResult = 'applied' | 'failed' | 'unchanged';

/** Why the last attempt failed: the step that failed (Reconciler's `ReconcileFailure`). */
export type FailureReason = 'SourceRefused' | 'FetchFailed' | 'ValidationFailed' | 'ApplyFailed';
/** A factory's status reason: its revision is live, or why the last attempt failed. */
export type StatusReason = 'Applied' | FailureReason;

/** The repository could not be read: no revision was attempted. */
export function isSourceFailure(reason: StatusReason | null): boolean {
  return reason === 'SourceRefused' || reason === 'FetchFailed';
}

export interface ApplyRecord {
  revision: string | null;
  result: ApplyResult;
  reason: StatusReason;
  message: string;
  errors: DefinitionError[];
  plan: PlanSummary | null;
  startedAt: Date;
  durationMs: number;
}

/** A factory's columns (`f` factories, `t` its team). */
export const FACTORY_COLUMNS = `f.id, f.uid, f.team_id, t.name AS team_name, t.uid AS team_uid, f.name, f.repo_url, f.repo_credentials_secret, f.branch, f.managed,
  f.description, f.definition, f.last_attempted_revision, f.last_applied_revision, f.ready, f.reason, f.message,
  f.created_at, f.updated_at`;

/** A row of FACTORY_COLUMNS. */
export interface FactoryRow {
  id: string;
  uid: string;
  team_id: string;
  team_name: string;
  team_uid: string;
  name: string;
  repo_url: string;
  repo_credentials_secret: string | null;
  branch: string;
  managed: boolean;
  description: string | null;
  definition: Record<string, unknown> | null;
  last_attempted_revision: string | null;
  last_applied_revision: string | null;
  ready: boolean;
  reason: StatusReason | null;
  message: string | null;
  created_at: Date;
  updated_at: Date;
}

export function toFactory(r: FactoryRow): FactoryRecord {
  return {
    id: r.id,
    uid: r.uid,
    teamId: r.team_id,
    teamName: r.team_name,
    teamUid: r.team_uid,
    name: r.name,
    repoUrl: r.repo_url,
    repoCredentialsSecret: r.repo_credentials_secret,
    branch: r.branch,
    managed: r.managed,
    description: r.description,
    definition: r.definition,
    lastAttemptedRevision: r.last_attempted_revision,
    lastAppliedRevision: r.last_applied_revision,
    ready: r.ready,
    reason: r.reason,
    message: r.message,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

/** The applied state of factories: the only writer of factories, agents, automations, webhooks, skills. */
@Injectable()
export class DefinitionStore {
  constructor(
    @Inject(Database) readonly db: Database,
    /** Outside the service (the CLI) one that only NOTIFYs: the serving replicas hear it. */
    @Optional() @Inject(Notifications) private readonly notifications = new Notifications(db),
  ) {}

  /** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }

  async register(input: {
    teamId: string;
    name: string;
    repoUrl: string;
    branch: string;
    /** factoryd owns the repository and writes it (management API); false: the team commits to it. */
    managed?: boolean;
  }): Promise<FactoryRecord | undefined> {
    const rows = await this.db.query<{ id: string }>(
      `INSERT INTO factories (uid, team_id, name, repo_url, branch, managed) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (team_id, name) DO NOTHING RETURNING id`,
      [newUid(), input.teamId, input.name, input.repoUrl, input.branch, input.managed ?? false],
    );
    return rows[0] ? this.find(rows[0].id) : undefined;
  }

  /** The repository URL without credentials, and the team secret that now holds them. */
  async setRepositoryCredentials(id: string, repoUrl: string, secretName: string): Promise<void> {
    await this.db.execute(
      `UPDATE factories SET repo_url = $2, repo_credentials_secret = $3, updated_at = now() WHERE id = $1`,
      [id, repoUrl, secretName],
    );
  }

  /**
   * Deletes a factory and everything it applied: agents, automations, skills, webhooks (their
   * deliveries too) and its apply history, once an apply in progress has ended (the factory's lock).
   * Runs belong to the team and stay. Returns how many live webhooks and automations went with it.
   */
  async remove(id: string): Promise<{ webhooks: number; automations: number }> {
    return this.db.transaction(async (tx) => {
      await this.lock(tx, id);
      const [counts] = await tx.query<{ webhooks: number; automations: number }>(
        `SELECT (SELECT count(*)::int FROM webhooks WHERE factory_id = $1 AND deleted_at IS NULL) AS webhooks,
                (SELECT count(*)::int FROM automations WHERE factory_id = $1 AND deleted_at IS NULL) AS automations`,
        [id],
      );
      await tx.query(`DELETE FROM factories WHERE id = $1`, [id]);
      // Announced like an apply: every replica's ingress drops the factory's webhooks (senders get 404).
      await this.notifications.publish(CHANNELS.definitionsApplied, id, tx);
      return counts;
    });
  }

  async listAll(): Promise<FactoryRecord[]> {
    const rows = await this.db.query<FactoryRow>(
      `SELECT ${FACTORY_COLUMNS} FROM factories f JOIN teams t ON t.id = f.team_id ORDER BY f.created_at`,
    );
    return rows.map(toFactory);
  }

  /** The repositories of the managed factories of every team but `teamId` (RepositoryPolicy). */
  async managedRepositoriesOfOtherTeams(teamId: string): Promise<string[]> {
    const rows = await this.db.query<{ repo_url: string }>(
      `SELECT repo_url FROM factories WHERE managed AND team_id <> $1`,
      [teamId],
    );
    return rows.map((r) => r.repo_url);
  }

  async find(id: string, q: Queryable = this.db): Promise<FactoryRecord | undefined> {
    const rows = await q.query<FactoryRow>(
      `SELECT ${FACTORY_COLUMNS} FROM factories f JOIN teams t ON t.id = f.team_id WHERE f.id = $1`,
      [id],
    );
    return rows[0] ? toFactory(rows[0]) : undefined;
  }

  /** Serialises applies of one factory across every replica, until the transaction ends; then rereads it. */
  async lock(tx: Queryable, id: string): Promise<FactoryRecord> {
    await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [`factoryd:factory:${id}`]);
    const f = await this.find(id, tx);
    if (!f) throw new Error(`factory ${id} no longer exists`);
    return f;
  }

  async appliedState(tx: Queryable, factoryId: string): Promise<AppliedState> {
    // One after another: a transaction's client runs one query at a time.
    const agents = await tx.query<AppliedRow>(
      `SELECT id, path, name, agent_type, description, overrides, base_prompt, deleted_at IS NOT NULL AS deleted
           FROM agents WHERE factory_id = $1`,
      [factoryId],
    );
    const automations = await tx.query<AppliedRow>(
      `SELECT id, path, name, enabled, agent_name, triggers, overrides, prompt, deleted_at IS NOT NULL AS deleted
           FROM automations WHERE factory_id = $1`,
      [factoryId],
    );
    const skills = await tx.query<AppliedRow>(
      `SELECT id, path, name, description, content, deleted_at IS NOT NULL AS deleted FROM factory_skills WHERE factory_id = $1`,
      [factoryId],
    );
    const webhooks = await tx.query<AppliedRow & { uid: string; secret_version_id: string | null }>(
      `SELECT id, uid, path, name, auth_mode, signature_scheme, secret_name, secret_version_id, delivery_id_header,
                enabled, description, deleted_at IS NOT NULL AS deleted
           FROM webhooks WHERE factory_id = $1 ORDER BY created_at`,
      [factoryId],
    );
    const notifications = await tx.query<
      { id: string; name: string; secret_version_id: string | null } & Columns
    >(
      `SELECT id, name, url, event_types, secret_name, secret_version_id, enabled, description
           FROM notification_endpoints WHERE factory_id = $1`,
      [factoryId],
    );
    const environments = await tx.query<{ id: string; name: string; config: Record<string, unknown> }>(
      `SELECT id, name, config FROM environments WHERE factory_id = $1`,
      [factoryId],
    );
    const base = (r: AppliedRow) => ({ id: r.id, path: r.path, name: r.name, deleted: r.deleted });
    return {
      agents: agents.map((r) => ({
        ...base(r),
        fields: {
          name: r.name,
          agentType: r.agent_type,
          description: r.description,
          overrides: r.overrides,
          basePrompt: r.base_prompt,
        },
      })),
      automations: automations.map((r) => ({
        ...base(r),
        fields: {
          name: r.name,
          enabled: r.enabled,
          agent: r.agent_name,
          triggers: r.triggers,
          overrides: r.overrides,
          prompt: r.prompt,
        },
      })),
      skills: skills.map((r) => ({
        ...base(r),
        fields: { name: r.name, description: r.description, content: r.content },
      })),
      webhooks: webhooks.map((r): AppliedWebhook => ({
        ...base(r),
        uid: r.uid,
        secretVersionId: r.secret_version_id,
        fields: {
          name: r.name,
          authMode: r.auth_mode,
          signatureScheme: r.signature_scheme,
          secretName: r.secret_name,
          deliveryIdHeader: r.delivery_id_header,
          enabled: r.enabled,
          description: r.description,
        },
      })),
      notifications: notifications.map((r) => ({
        id: r.id,
        path: `notifications/${r.name}.yaml`,
        name: r.name,
        deleted: false,
        secretVersionId: r.secret_version_id,
        fields: {
          url: r.url,
          events: r.event_types,
          secretName: r.secret_name,
          enabled: r.enabled,
          description: r.description,
        },
      })),
      environments: environments.map((r) => ({
        id: r.id,
        path: `environments/${r.name}.yaml`,
        name: r.name,
        deleted: false,
        fields: r.config,
      })),
    };
  }

  /**
   * The environments environments/<name>.yaml define: named after the file, owned by the factory, a
   * uid kept across changes. A name another factory of the team uses fails the apply.
   */
  private async applyEnvironments(
    tx: Queryable,
    factory: FactoryRecord,
    plan: Plan,
    now: Date,
  ): Promise<void> {
    const names = (paths: string[]) => paths.map((p) => p.slice('environments/'.length, -'.yaml'.length));
    if (plan.environments.delete.length)
      await tx.execute(`DELETE FROM environments WHERE factory_id = $1 AND name = ANY($2)`, [
        factory.id,
        names(plan.environments.delete),
      ]);
    for (const e of [...plan.environments.create, ...plan.environments.update]) {
      const written = await tx.execute(
        `INSERT INTO environments (uid, team_id, factory_id, name, config, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $6)
         ON CONFLICT (team_id, name) DO UPDATE SET config = EXCLUDED.config, updated_at = EXCLUDED.updated_at
         WHERE environments.factory_id = EXCLUDED.factory_id`,
        [newUid(), factory.teamId, factory.id, e.name, fieldsOf.environment(e), now],
      );
      if (!written)
        throw new Error(
          `${e.path}: the team already has an environment named ${e.name} (in another factory); rename the file`,
        );
    }
  }

  /**
   * The endpoints notifications/<name>.yaml define: named after the file, owned by the factory, signed
   * with the team secret's version current at this apply. A name another endpoint of the team has
   * (made by the API or another factory) fails the apply.
   */
  private async applyNotifications(
    tx: Queryable,
    factory: FactoryRecord,
    plan: Plan,
    now: Date,
  ): Promise<void> {
    const names = (paths: string[]) => paths.map((p) => p.slice('notifications/'.length, -'.yaml'.length));
    if (plan.notifications.delete.length)
      await tx.execute(`DELETE FROM notification_endpoints WHERE factory_id = $1 AND name = ANY($2)`, [
        factory.id,
        names(plan.notifications.delete),
      ]);
    for (const n of [...plan.notifications.create, ...plan.notifications.update]) {
      const written = await tx.execute(
        `INSERT INTO notification_endpoints (id, team_id, factory_id, name, url, event_types, description, secret_name,
                                             secret_version_id, enabled, created_at, updated_at)
         VALUES (gen_random_uuid(), $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)
         ON CONFLICT (team_id, name) DO UPDATE SET url = EXCLUDED.url, event_types = EXCLUDED.event_types,
           description = EXCLUDED.description, secret_name = EXCLUDED.secret_name,
           secret_version_id = EXCLUDED.secret_version_id, enabled = EXCLUDED.enabled,
           disabled_reason = NULL, consecutive_failures = 0, failing_since = NULL, held_until = ${HELD_UNLESS_IN_FLIGHT},
           updated_at = EXCLUDED.updated_at
         WHERE notification_endpoints.factory_id = EXCLUDED.factory_id`,
        [
          factory.teamId,
          factory.id,
          n.name,
          n.url,
          n.events,
          n.description ?? null,
          n.secretName,
          plan.secretVersions.get(n.secretName) ?? null,
          n.enabled,
          now,
        ],
      );
      if (!written)
        throw new Error(
          `${n.path}: the team already has a notification endpoint named ${n.name} (made by the API or another factory); rename the file`,
        );
    }
  }

  /** Writes a plan: upserts by path (reviving tombstones), tombstones removed files, new UIDs for new webhooks. */
  async applyPlan(
    tx: Queryable,
    factory: FactoryRecord,
    def: FactoryDefinition,
    plan: Plan,
    now: Date,
  ): Promise<void> {
    const f = factory.id;
    const agents = [...plan.agents.create, ...plan.agents.update].map((a) => ({
      path: a.path,
      ...fieldsOf.agent(a),
    }));
    if (agents.length) {
      await tx.execute(
        `INSERT INTO agents (factory_id, name, path, agent_type, description, overrides, base_prompt, created_at, updated_at)
         SELECT $1, x.name, x.path, x."agentType", x.description, x.overrides, x."basePrompt", $3, $3
           FROM jsonb_to_recordset($2::jsonb) AS x(name text, path text, "agentType" text, description text, overrides jsonb, "basePrompt" text)
         ON CONFLICT (factory_id, path) DO UPDATE SET name = EXCLUDED.name, agent_type = EXCLUDED.agent_type,
           description = EXCLUDED.description, overrides = EXCLUDED.overrides, base_prompt = EXCLUDED.base_prompt,
           deleted_at = NULL, updated_at = $3`,
        [f, JSON.stringify(agents), now],
      );
    }
    const automations = [...plan.automations.create, ...plan.automations.update].map((a) => ({
      path: a.path,
      ...fieldsOf.automation(a),
    }));
    if (automations.length) {
      await tx.execute(
        `INSERT INTO automations (factory_id, name, path, enabled, agent_name, triggers, overrides, prompt, created_at, updated_at)
         SELECT $1, x.name, x.path, x.enabled, x.agent, x.triggers, x.overrides, x.prompt, $3, $3
           FROM jsonb_to_recordset($2::jsonb) AS x(name text, path text, enabled boolean, agent text, triggers jsonb, overrides jsonb, prompt text)
         ON CONFLICT (factory_id, path) DO UPDATE SET name = EXCLUDED.name, enabled = EXCLUDED.enabled,
           agent_name = EXCLUDED.agent_name, triggers = EXCLUDED.triggers, overrides = EXCLUDED.overrides,
           prompt = EXCLUDED.prompt, deleted_at = NULL, updated_at = $3`,
        [f, JSON.stringify(automations), now],
      );
    }
    const skills = [...plan.skills.create, ...plan.skills.update].map((s) => ({
      path: s.path,
      ...fieldsOf.skill(s),
    }));
    if (skills.length) {
      await tx.execute(
        `INSERT INTO factory_skills (factory_id, name, path, description, content, created_at, updated_at)
         SELECT $1, x.name, x.path, x.description, x.content, $3, $3
           FROM jsonb_to_recordset($2::jsonb) AS x(name text, path text, description text, content text)
         ON CONFLICT (factory_id, path) DO UPDATE SET name = EXCLUDED.name, description = EXCLUDED.description,
           content = EXCLUDED.content, deleted_at = NULL, updated_at = $3`,
        [f, JSON.stringify(skills), now],
      );
    }
    for (const [table, paths] of [
      ['agents', plan.agents.delete],
      ['automations', plan.automations.delete],
      ['factory_skills', plan.skills.delete],
      ['webhooks', plan.webhooks.delete],
    ] as const) {
      if (paths.length) {
        await tx.execute(
          `UPDATE ${table} SET deleted_at = $3, updated_at = $3 WHERE factory_id = $1 AND path = ANY($2) AND deleted_at IS NULL`,
          [f, paths, now],
        );
      }
    }
    for (const w of plan.webhooks.create) {
      await tx.execute(
        `INSERT INTO webhooks (uid, factory_id, team_id, name, path, auth_mode, signature_scheme, secret_name, secret_version_id,
                               delivery_id_header, enabled, description, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13)`,
        [
          newUid(),
          f,
          factory.teamId,
          w.name,
          w.path,
          w.authMode,
          w.signatureScheme ?? null,
          w.secretName,
          plan.secretVersions.get(w.secretName) ?? null,
          w.deliveryIdHeader ?? null,
          w.enabled,
          w.description ?? null,
          now,
        ],
      );
    }
    for (const w of plan.webhooks.update) {
      await tx.execute(
        `UPDATE webhooks SET auth_mode = $2, signature_scheme = $3, secret_name = $4, secret_version_id = $5,
                delivery_id_header = $6, enabled = $7, description = $8, updated_at = $9
          WHERE id = $1`,
        [
          plan.webhooks.live.get(w.path)!.id,
          w.authMode,
          w.signatureScheme ?? null,
          w.secretName,
          plan.secretVersions.get(w.secretName) ?? null,
          w.deliveryIdHeader ?? null,
          w.enabled,
          w.description ?? null,
          now,
        ],
      );
    }
    await this.applyNotifications(tx, factory, plan, now);
    await this.applyEnvironments(tx, factory, plan, now);
    await tx.execute(
      `UPDATE factories SET description = $2, definition = $3, updated_at = $4 WHERE id = $1`,
      [
        f,
        def.description ?? null,
        {
          name: def.name,
          description: def.description,
          agentDefaults: def.agentDefaults,
          repositories: def.repositories,
        },
        now,
      ],
    );
  }

  /** The attempt's row in the history and the factory's status; on success also tells every replica. */
  async record(tx: Queryable, factoryId: string, r: ApplyRecord): Promise<void> {
    await tx.execute(
      `INSERT INTO factory_applies (factory_id, revision, result, reason, errors, plan, started_at, duration_ms)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [
        factoryId,
        r.revision,
        r.result,
        r.reason,
        JSON.stringify(r.errors),
        r.plan && JSON.stringify(r.plan),
        r.startedAt,
        r.durationMs,
      ],
    );
    const ok = r.result !== 'failed';
    await tx.execute(
      `UPDATE factories SET last_attempted_revision = coalesce($2, last_attempted_revision),
              last_applied_revision = CASE WHEN $3 THEN $2 ELSE last_applied_revision END,
              ready = $3, reason = $4, message = $5, updated_at = now()
        WHERE id = $1`,
      [factoryId, r.revision, ok, r.reason, r.message],
    );
    // With the commit: this replica's caches refresh before the writer answers, the others by NOTIFY.
    if (r.result === 'applied') await this.notifications.publish(CHANNELS.definitionsApplied, factoryId, tx);
  }
}
