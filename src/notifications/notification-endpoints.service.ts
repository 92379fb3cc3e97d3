import { Conflict, invalidParam, NotFound } from '../common/problem.js';
import { newUuid, UUID_PATTERN } from '../common/ids.js';
import type { AuthContext } from '../auth/auth-context.js';
import type { Notifications } from '../database/notifications.js';
import { CHANNELS } from '../database/channels.js';
import { generateSecret } from '../secrets/secret-generator.js';
import type { SecretCipher } from '../secrets/secret-cipher.js';
import { endpointUrlProblem } from '../common/outbound-url.js';
import type {
  AttemptRow,
  EndpointRow,
  MessageRow,
  NotificationsRepository,
} from './notifications.repository.js';

export interface EndpointCreateRequest {
  name: string;
  url: string;
  event_types?: string[];
  description?: string;
  enabled?: boolean;
}

export type EndpointUpdateRequest = Partial<Omit<EndpointCreateRequest, 'name'>> & {
  description?: string | null;
};

/** The body every attempt of a message POSTs (Standard Webhooks' `{type, timestamp, data}`). */
export function messageBody(m: Pick<MessageRow, 'type' | 'event_at' | 'payload'>): string {
  return JSON.stringify({ type: m.type, timestamp: new Date(m.event_at).toISOString(), data: m.payload });
}

function presentEndpoint(e: EndpointRow) {
  return {
    id: e.id,
    name: e.name,
    url: e.url,
    event_types: e.event_types,
    ...(e.description ? { description: e.description } : {}),
    enabled: e.enabled,
    ...(e.disabled_reason ? { disabled_reason: e.disabled_reason } : {}),
    consecutive_failures: e.consecutive_failures,
    ...(e.failing_since ? { failing_since: e.failing_since.toISOString() } : {}),
    managed_by_factory: e.factory_id !== null,
    created_at: e.created_at.toISOString(),
    updated_at: e.updated_at.toISOString(),
  };
}

function presentMessage(m: MessageRow) {
  return {
    id: m.id,
    type: m.type,
    ...(m.run_id ? { run_id: m.run_id } : {}),
    status: m.status,
    attempts: m.attempts,
    ...(m.next_attempt_at && m.status === 'pending'
      ? { next_attempt_at: m.next_attempt_at.toISOString() }
      : {}),
    ...(m.delivered_at ? { delivered_at: m.delivered_at.toISOString() } : {}),
    created_at: m.created_at.toISOString(),
    payload: JSON.parse(messageBody(m)) as unknown,
  };
}

function presentAttempt(a: AttemptRow) {
  return {
    id: a.id,
    message_id: a.message_id,
    attempted_at: a.attempted_at.toISOString(),
    succeeded: a.succeeded,
    status_code: a.status_code,
    latency_ms: a.latency_ms,
    ...(a.error ? { error: a.error } : {}),
    ...(a.response_excerpt ? { response_excerpt: a.response_excerpt } : {}),
  };
}

export const MESSAGE_STATUSES = ['pending', 'delivered', 'failed'] as const;

/** GET …/messages, parsed by the controller. */
export interface MessageListQuery {
  status?: (typeof MESSAGE_STATUSES)[number];
  limit: number;
}

/** GET …/attempts, parsed by the controller. */
export interface AttemptListQuery {
  messageId?: string;
  limit: number;
}

/** Notification endpoints the API may make per team (every one is a delivery per event). */
const MAX_API_ENDPOINTS_PER_TEAM = 100;

/**
 * The API's endpoint operations, all within the caller's team (another team's endpoint is a 404).
 * Secrets are `whsec_…`, sealed at rest with the team secrets' cipher (bound to the endpoint's id),
 * and shown only in the answer that made them.
 */
export class NotificationEndpoints {
  constructor(
    private readonly repo: NotificationsRepository,
    private readonly cipher: SecretCipher,
    private readonly opts: { allowPrivateUrls: boolean; now: () => Date },
    private readonly notifications?: Notifications,
  ) {}

  async create(auth: AuthContext, req: EndpointCreateRequest, factoryId: string | null = null) {
    this.checkUrl(req.url);
    const id = newUuid();
    const secret = generateSecret('whsec');
    const row = await this.repo.insertEndpoint(
      {
        id,
        team_id: auth.team.id,
        factory_id: factoryId,
        name: req.name,
        url: req.url,
        event_types: [...new Set(req.event_types ?? [])],
        description: req.description ?? null,
        secret: this.cipher.encrypt(secret, id),
        enabled: req.enabled ?? true,
      },
      MAX_API_ENDPOINTS_PER_TEAM,
    );
    if (
      !row &&
      factoryId === null &&
      (await this.repo.countApiEndpoints(auth.team.id)) >= MAX_API_ENDPOINTS_PER_TEAM
    )
      throw new Conflict(
        `this team already has ${MAX_API_ENDPOINTS_PER_TEAM} notification endpoints, the most it may have: delete one first`,
      );
    if (!row)
      throw new Conflict(`an endpoint named ${req.name} already exists in this team; pick another name`);
    return { endpoint: presentEndpoint(row), secret };
  }

  async list(auth: AuthContext) {
    return { endpoints: (await this.repo.listEndpoints(auth.team.id)).map(presentEndpoint) };
  }

  async get(auth: AuthContext, id: string) {
    return presentEndpoint(await this.find(auth, id));
  }

  async update(auth: AuthContext, id: string, req: EndpointUpdateRequest) {
    this.checkManual(await this.find(auth, id));
    if (req.url !== undefined) this.checkUrl(req.url);
    const row = await this.repo.updateEndpoint(auth.team.id, id, {
      url: req.url,
      event_types: req.event_types && [...new Set(req.event_types)],
      description: req.description,
      enabled: req.enabled,
    });
    if (!row) throw this.notFound(id);
    if (req.enabled) this.announceDue();
    return presentEndpoint(row);
  }

  async delete(auth: AuthContext, id: string): Promise<void> {
    this.checkManual(await this.find(auth, id));
    await this.repo.deleteEndpoint(auth.team.id, id);
  }

  /** A new secret, shown once; the old one signs nothing more. */
  async rotate(auth: AuthContext, id: string) {
    this.checkManual(await this.find(auth, id));
    const secret = generateSecret('whsec');
    const row = await this.repo.updateEndpoint(auth.team.id, id, { secret: this.cipher.encrypt(secret, id) });
    if (!row) throw this.notFound(id);
    return { endpoint: presentEndpoint(row), secret };
  }

  async messages(auth: AuthContext, id: string, q: MessageListQuery) {
    await this.find(auth, id);
    return { messages: (await this.repo.listMessages(id, q.limit, q.status)).map(presentMessage) };
  }

  async attempts(auth: AuthContext, id: string, q: AttemptListQuery) {
    await this.find(auth, id);
    return { attempts: (await this.repo.listAttempts(id, q.limit, q.messageId)).map(presentAttempt) };
  }

  /** Sends a message again now, whatever became of it, with the whole retry schedule ahead. */
  async resend(auth: AuthContext, id: string, messageId: string) {
    await this.find(auth, id);
    const row = UUID_PATTERN.test(messageId)
      ? await this.repo.resend(id, messageId, this.opts.now())
      : undefined;
    if (!row) throw new NotFound(`no message ${messageId} for endpoint ${id}`);
    this.announceDue();
    return presentMessage(row);
  }

  private announceDue(): void {
    void this.notifications?.publish(CHANNELS.notificationsDue, undefined).catch(() => undefined);
  }

  private async find(auth: AuthContext, id: string): Promise<EndpointRow> {
    const row = UUID_PATTERN.test(id) ? await this.repo.findEndpoint(auth.team.id, id) : undefined;
    if (!row) throw this.notFound(id);
    return row;
  }

  private notFound(id: string): NotFound {
    return new NotFound(`no notification endpoint ${id} in this team`);
  }

  private checkManual(e: EndpointRow): void {
    if (e.factory_id !== null)
      throw new Conflict(
        `endpoint ${e.name} is defined by a factory file (notifications/${e.name}.yaml); change it in the factory repository`,
      );
  }

  private checkUrl(url: string): void {
    const problem = endpointUrlProblem(url, this.opts.allowPrivateUrls);
    if (problem) throw invalidParam('url', problem);
  }
}
