import { Inject, Injectable } from '@nestjs/common';
import type { AuthContext } from '../auth/auth-context.js';
import { Clock } from '../common/clock.js';
import { newUid } from '../common/ids.js';
import { isoKey, pageOf, type PageInfo, type PageRequest } from '../common/pagination.js';
import { Conflict, NotFound } from '../common/problem.js';
import { checkMetadataValue, titleFromPrompt } from '../runs/run.js';
import { TeamQueueCap } from '../runs/team-queue-cap.js';
import { Database } from '../database/database.js';
import { resolveAgentConfig } from '../definitions/agent-config.js';
import type { AgentOverrides } from '../definitions/definition.js';
import type { FactoryRecord } from '../reconciler/definition-store.js';
import { Reconciler, type ReconcileOutcome } from '../reconciler/reconciler.js';
import { RunsRepository } from '../runs/runs.repository.js';
import {
  FactoriesRepository,
  type ApplyRow,
  type DefinitionRows,
  type WebhookRow,
} from './factories.repository.js';

/** Cursor scopes of the two listings (a cursor of one is refused by the other). */
export const FACTORIES_SCOPE = 'factories:name';
export const APPLIES_SCOPE = 'factory-applies';

/** POST /factory/{uid}/runs. */
export interface FactoryRunRequest {
  prompt: string;
  title?: string;
  ticket_ref?: string;
  ticket_url?: string;
}

/** GET /factory: a page of the team's factories by name, optionally those matching `search`. */
export interface FactoryListQuery extends PageRequest {
  search?: string;
}

/** The factory API: listing, status and history, webhooks, dispatch to the foreman, refresh. */
@Injectable()
export class FactoriesService {
  /** The plan running now, by factory id. */
  private readonly plans = new Map<string, Promise<ReconcileOutcome>>();

  constructor(
    @Inject(FactoriesRepository) private readonly repo: FactoriesRepository,
    @Inject(RunsRepository) private readonly runs: RunsRepository,
    @Inject(Reconciler) private readonly reconciler: Reconciler,
    @Inject(Database) private readonly db: Database,
    @Inject(Clock) private readonly clock: Clock,
    @Inject(TeamQueueCap) private readonly queueCap: TeamQueueCap,
  ) {}

  async list(
    auth: AuthContext,
    query: FactoryListQuery,
  ): Promise<{ factories: FactoryRecord[]; pageInfo: PageInfo }> {
    const { after, limit } = query;
    const rows = await this.repo.list(
      auth.team.id,
      query.search,
      after && { name: String(after.key), id: after.id },
      limit + 1,
    );
    const { items, pageInfo } = pageOf(rows, limit, (f) => ({
      scope: FACTORIES_SCOPE,
      key: f.name,
      id: f.id,
    }));
    return { factories: items, pageInfo };
  }

  async get(auth: AuthContext, uid: string): Promise<FactoryRecord> {
    const f = await this.repo.findByUid(auth.team.id, uid);
    if (!f)
      throw new NotFound(`factory ${uid} does not exist in team ${auth.team.name}; see GET /api/v1/factory`);
    return f;
  }

  async webhooks(auth: AuthContext, uid: string, includeDeleted: boolean): Promise<WebhookRow[]> {
    return this.repo.webhooks((await this.get(auth, uid)).id, includeDeleted);
  }

  async applies(
    auth: AuthContext,
    uid: string,
    page: PageRequest,
  ): Promise<{ applies: ApplyRow[]; pageInfo: PageInfo }> {
    const f = await this.get(auth, uid);
    const { after, limit } = page;
    const rows = await this.repo.applies(
      f.id,
      after && { startedAt: isoKey(after), id: after.id },
      limit + 1,
    );
    const { items, pageInfo } = pageOf(rows, limit, (a) => ({
      scope: APPLIES_SCOPE,
      key: a.started_at.toISOString(),
      id: a.id,
    }));
    return { applies: items, pageInfo };
  }

  /**
   * A QUEUED run of the foreman, source FACTORY, with the foreman's resolved config, linked to the
   * ticket it works on: the caller's `ticket_ref` (`<source>:<id>`), else a minted `adhoc:<id>`.
   */
  async dispatch(auth: AuthContext, uid: string, req: FactoryRunRequest) {
    const f = await this.get(auth, uid);
    const foreman = await this.repo.foreman(f.id);
    if (!foreman) {
      throw new Conflict(
        `factory ${f.name} has no applied definition yet (${f.reason ?? 'never reconciled'}${f.message ? `: ${f.message}` : ''}); fix the repository or POST /api/v1/factory/${f.uid}/refresh`,
        true,
      );
    }
    const defaults = ((f.definition?.agentDefaults as AgentOverrides | undefined) ?? {}) as AgentOverrides;
    const config = resolveAgentConfig(defaults, {
      name: foreman.name,
      overrides: foreman.overrides as AgentOverrides,
      basePrompt: foreman.base_prompt,
    });
    const ticketRef = req.ticket_ref ?? `adhoc:${newUid()}`;
    const separator = ticketRef.indexOf(':');
    // The clients read these back (`metadata[ticket_id]=…` finds a ticket's runs), so they keep to
    // the clients' bound on a metadata value, as a run's own metadata does.
    const metadata: Record<string, string> = {
      factory_uid: f.uid,
      ticket_source: ticketRef.slice(0, separator),
      ticket_id: ticketRef.slice(separator + 1),
      ...(req.ticket_url ? { ticket_url: req.ticket_url } : {}),
    };
    for (const [key, value] of Object.entries(metadata))
      checkMetadataValue(key, value, key === 'ticket_url' ? 'ticket_url' : 'ticket_ref');
    await this.queueCap.ensureRoom(auth.team.id);
    const runId = await this.db.transaction((tx) =>
      this.runs.insert(
        tx,
        {
          teamId: auth.team.id,
          title: req.title ?? titleFromPrompt(req.prompt, ''),
          prompt: req.prompt,
          source: 'FACTORY',
          creatorId: auth.principal.id,
          agentConfig: config,
          metadata,
          factoryUid: f.uid,
        },
        this.clock.now(),
      ),
    );
    return {
      factory_uid: f.uid,
      foreman_agent: foreman.name,
      run_id: runId,
      state: 'QUEUED',
      ticket_ref: ticketRef,
      ...(req.ticket_url ? { ticket_url: req.ticket_url } : {}),
    };
  }

  /** The applied agents, automations and skills of a factory. */
  async definition(auth: AuthContext, uid: string): Promise<DefinitionRows> {
    return this.repo.definition((await this.get(auth, uid)).id);
  }

  /**
   * What reconciling the head now would change: a dry run, nothing applied or recorded. Requests for
   * one factory that arrive while its plan runs share that plan (one fetch, however many readers ask).
   */
  async plan(auth: AuthContext, uid: string): Promise<ReconcileOutcome> {
    const { id } = await this.get(auth, uid);
    let running = this.plans.get(id);
    if (!running) {
      running = this.reconciler.plan(id).finally(() => this.plans.delete(id));
      this.plans.set(id, running);
    }
    return running;
  }

  /** Starts a reconcile of the head now (even if it was already attempted); does not wait for it. */
  async refresh(auth: AuthContext, uid: string) {
    const f = await this.get(auth, uid);
    void this.reconciler.request(f.id, true).catch(() => undefined);
    return { factory_uid: f.uid, status: 'reconciling' };
  }
}
