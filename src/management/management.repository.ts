import { Inject, Injectable } from '@nestjs/common';
import { Database } from '../database/database.js';
import type { WebhookRow } from '../factories/factories.repository.js';

/** A webhook as the management API shows and changes it. */
export interface ManagedWebhookRow extends WebhookRow {
  id: string;
  path: string;
  factory_id: string;
  factory_uid: string;
  factory_name: string;
  description: string | null;
  /** Created disabled until the provider's signing secret is set (POST /webhooks/{uid}/secret). */
  awaiting_secret: boolean;
}

export interface AutomationRow {
  name: string;
  path: string;
  enabled: boolean;
  triggers: unknown;
}

const WEBHOOK = `SELECT w.id, w.uid, w.name, w.path, w.auth_mode, w.signature_scheme, w.secret_name, w.delivery_id_header,
       w.enabled, w.deleted_at IS NOT NULL AS deleted, w.created_at, w.description, w.factory_id, f.uid AS factory_uid, f.name AS factory_name,
       EXISTS (SELECT 1 FROM webhooks_awaiting_secret a WHERE a.webhook_id = w.id) AS awaiting_secret
  FROM webhooks w JOIN factories f ON f.id = w.factory_id`;

/** Reads of the applied webhooks and automations for management, and the "awaiting secret" marks. */
@Injectable()
export class ManagementRepository {
  constructor(@Inject(Database) private readonly db: Database) {}

  /** The team's webhook with this UID, live or deleted. */
  async webhook(teamId: string, uid: string): Promise<ManagedWebhookRow | undefined> {
    const rows = await this.db.query<ManagedWebhookRow>(`${WEBHOOK} WHERE w.uid = $1 AND w.team_id = $2`, [
      uid,
      teamId,
    ]);
    return rows[0];
  }

  /** The live webhook of a factory's file. */
  async liveWebhook(factoryId: string, path: string): Promise<ManagedWebhookRow | undefined> {
    const rows = await this.db.query<ManagedWebhookRow>(
      `${WEBHOOK} WHERE w.factory_id = $1 AND w.path = $2 AND w.deleted_at IS NULL`,
      [factoryId, path],
    );
    return rows[0];
  }

  /** The team's other live webhooks on the team secret `secretName` (every factory of the team). */
  async sharingSecret(teamId: string, secretName: string, exceptUid: string): Promise<ManagedWebhookRow[]> {
    return this.db.query<ManagedWebhookRow>(
      `${WEBHOOK} WHERE w.team_id = $1 AND w.secret_name = $2 AND w.uid <> $3 AND w.deleted_at IS NULL
        ORDER BY f.name, w.name`,
      [teamId, secretName, exceptUid],
    );
  }

  async markAwaitingSecret(webhookId: string): Promise<void> {
    await this.db.execute(
      `INSERT INTO webhooks_awaiting_secret (webhook_id) VALUES ($1) ON CONFLICT DO NOTHING`,
      [webhookId],
    );
  }

  async clearAwaitingSecret(webhookId: string): Promise<void> {
    await this.db.execute(`DELETE FROM webhooks_awaiting_secret WHERE webhook_id = $1`, [webhookId]);
  }

  /** The factory's live automations, by name. */
  async automations(factoryId: string): Promise<AutomationRow[]> {
    return this.db.query<AutomationRow>(
      `SELECT name, path, enabled, triggers FROM automations WHERE factory_id = $1 AND deleted_at IS NULL ORDER BY name`,
      [factoryId],
    );
  }
}
