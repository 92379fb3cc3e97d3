import { Inject, Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { TriggerIndex, type Trigger } from '../automations/trigger-index.js';
import { CHANNELS } from '../database/channels.js';
import { Database } from '../database/database.js';
import { Notifications } from '../database/notifications.js';
import { SecretsService } from '../secrets/secrets.service.js';
import { keptHeaderNames } from './kept-headers.js';
import { SIGNATURE_SCHEMES, type SignatureScheme } from './verifiers/index.js';

/** A webhook that accepts deliveries: its applied definition, pinned secret and compiled triggers. */
export interface LiveWebhook {
  id: string;
  uid: string;
  teamId: string;
  factoryId: string;
  name: string;
  authMode: 'token' | 'url_token' | 'signature';
  /** Undefined for a `signature` webhook naming an unknown scheme: every delivery then fails auth. */
  scheme?: SignatureScheme;
  /** The pinned secret version's value; undefined when none is pinned yet. */
  secret?: string;
  deliveryIdHeader?: string;
  triggers: Trigger[];
  /** The (lower-case) names of the headers stored with each delivery: see keptHeaders. */
  keptHeaders: string[];
}

/** `refresh`'s argument for "every factory". */
const ALL = undefined;

/**
 * The ingress's view of enabled webhooks, kept in memory and rebuilt per factory whenever an apply
 * is announced (CHANNELS.definitionsApplied: at once for an apply of this process, by NOTIFY for the
 * others; everything after the listener was cut off), so a replica never serves a stale secret or
 * trigger. A UID it does not know yet is looked up in the database (another replica's apply may
 * commit before its notification arrives).
 *
 * Read-your-writes: an apply of this process queues its refresh at its commit, before whoever made
 * the change (the management API) answers; a lookup waits for the refreshes queued before it. A
 * refresh that failed (the database out of reach) is done again by the next lookup, which fails
 * rather than answer from the stale view.
 */
@Injectable()
export class WebhookDirectory implements OnModuleInit {
  private readonly logger = new Logger(WebhookDirectory.name);
  private byUid = new Map<string, LiveWebhook>();
  /** Refreshes run one at a time, so an older load never overwrites a newer one. */
  private queue: Promise<unknown> = Promise.resolve();
  /** Refreshes queued and not yet ended. */
  private queued = 0;
  /** Factories (ALL: every one) whose last refresh failed: the view of them may be stale. */
  private stale = new Set<string | undefined>();

  constructor(
    @Inject(Database) private readonly db: Database,
    @Inject(SecretsService) private readonly secrets: SecretsService,
    @Inject(TriggerIndex) private readonly triggers: TriggerIndex,
    @Inject(Notifications) notifications: Notifications,
  ) {
    const refreshLogged = (factoryId: string | undefined) =>
      this.refresh(factoryId).catch((err: unknown) =>
        this.logger.error({ err }, `refreshing webhooks after an apply failed`),
      );
    notifications.subscribe(CHANNELS.definitionsApplied, {
      notified: (factoryId) => refreshLogged(factoryId),
      resync: () => refreshLogged(ALL),
    });
  }

  async onModuleInit(): Promise<void> {
    await this.refresh(ALL);
  }

  async get(uid: string): Promise<LiveWebhook | undefined> {
    if (this.stale.size) for (const factoryId of [...this.stale]) await this.refresh(factoryId);
    else if (this.queued) await this.queue;
    const known = this.byUid.get(uid);
    if (known) return known;
    const [row] = await this.db.query<{ factory_id: string }>(
      `SELECT factory_id FROM webhooks WHERE uid = $1 AND enabled AND deleted_at IS NULL`,
      [uid],
    );
    if (!row) return undefined;
    await this.refresh(row.factory_id);
    return this.byUid.get(uid);
  }

  /** Reloads one factory's webhooks and triggers (all factories when `factoryId` is undefined). */
  refresh(factoryId: string | undefined): Promise<void> {
    this.queued++;
    const run = this.queue.then(() => this.load(factoryId));
    this.queue = run.then(
      () => {
        this.queued--;
        this.stale.delete(factoryId);
        if (factoryId === ALL) this.stale.clear();
      },
      () => {
        this.queued--;
        this.stale.add(factoryId);
      },
    );
    return run;
  }

  private async load(factoryId: string | undefined): Promise<void> {
    const factoryIds = factoryId
      ? [factoryId]
      : (await this.db.query<{ id: string }>(`SELECT id FROM factories`)).map((f) => f.id);
    const next = new Map(this.byUid);
    for (const id of factoryIds) {
      for (const [uid, hook] of next) if (hook.factoryId === id) next.delete(uid);
      for (const hook of await this.loadFactory(id)) next.set(hook.uid, hook);
    }
    if (!factoryId)
      for (const [uid, hook] of next) if (!factoryIds.includes(hook.factoryId)) next.delete(uid);
    this.byUid = next;
  }

  private async loadFactory(factoryId: string): Promise<LiveWebhook[]> {
    const rows = await this.db.query<{
      id: string;
      uid: string;
      team_id: string;
      name: string;
      auth_mode: LiveWebhook['authMode'];
      signature_scheme: string | null;
      secret_version_id: string | null;
      delivery_id_header: string | null;
    }>(
      `SELECT id, uid, team_id, name, auth_mode, signature_scheme, secret_version_id, delivery_id_header
         FROM webhooks WHERE factory_id = $1 AND enabled AND deleted_at IS NULL`,
      [factoryId],
    );
    if (rows.length === 0) return [];
    const triggers = await this.triggers.load(factoryId);
    return Promise.all(
      rows.map(async (r) => ({
        ...withKeptHeaders(r.delivery_id_header?.toLowerCase() ?? undefined, triggers.get(r.uid) ?? []),
        id: r.id,
        uid: r.uid,
        teamId: r.team_id,
        factoryId,
        name: r.name,
        authMode: r.auth_mode,
        scheme: r.signature_scheme ? SIGNATURE_SCHEMES[r.signature_scheme] : undefined,
        secret: r.secret_version_id ? await this.secrets.valueOf(r.secret_version_id) : undefined,
      })),
    );
  }
}

function withKeptHeaders(deliveryIdHeader: string | undefined, triggers: Trigger[]) {
  return {
    deliveryIdHeader,
    triggers,
    keptHeaders: keptHeaderNames(
      deliveryIdHeader,
      triggers.flatMap((t) => t.headerNames),
    ),
  };
}
