import { Inject, Injectable } from '@nestjs/common';
import type { AuthContext } from '../auth/auth-context.js';
import { Clock } from '../common/clock.js';
import { decodeCursor, encodeCursor, isoKey, type PageInfo } from '../common/cursor.js';
import { Conflict, InvalidRequest, NotFound } from '../common/problem.js';
import { titleFromPrompt } from '../runs/run.js';
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

const LIST_SCOPE = 'factories:name';
const APPLIES_SCOPE = 'factory-applies';

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
  ) {}

  async list(
    auth: AuthContext,
    q: URLSearchParams,
  ): Promise<{ factories: FactoryRecord[]; pageInfo: PageInfo }> {
    const limit = limitOf(q, 50, 100);
    const cursor = q.get('cursor');
    const after = cursor ? decodeCursor(cursor, LIST_SCOPE) : undefined;
    const rows = await this.repo.list(
      auth.team.id,
      q.get('search') || undefined,
      after && { name: String(after.key), id: after.id },
      limit + 1,
    );
    return {
      factories: rows.slice(0, limit),
      pageInfo: pageInfo(rows, limit, (f) => ({ scope: LIST_SCOPE, key: f.name, id: f.id })),
    };
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
    q: URLSearchParams,
  ): Promise<{ applies: ApplyRow[]; pageInfo: PageInfo }> {
    const f = await this.get(auth, uid);
    const limit = limitOf(q, 20, 100);
    const cursor = q.get('cursor');
    const after = cursor ? decodeCursor(cursor, APPLIES_SCOPE) : undefined;
    const rows = await this.repo.applies(
      f.id,
      after && { startedAt: isoKey(after), id: after.id },
      limit + 1,
    );
    return {
      applies: rows.slice(0, limit),
      pageInfo: pageInfo(rows, limit, (a) => ({
        scope: APPLIES_SCOPE,
        key: a.started_at.toISOString(),
        id: a.id,
      })),
    };
  }

  /** A QUEUED run of the foreman, source FACTORY, with the foreman's resolved config. */
  async dispatch(auth: AuthContext, uid: string, req: { prompt: string; title?: string }) {
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
        },
        this.clock.now(),
      ),
    );
    return { factory_uid: f.uid, foreman_agent: foreman.name, run_id: runId, state: 'QUEUED' };
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

function limitOf(q: URLSearchParams, fallback: number, max: number): number {
  const v = q.get('limit');
  if (v === null) return fallback;
  if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > max)
    throw new InvalidRequest(`limit must be a whole number from 1 to ${max}`);
  return Number(v);
}

function pageInfo<T>(
  rows: T[],
  limit: number,
  position: (t: T) => Parameters<typeof encodeCursor>[0],
): PageInfo {
  if (rows.length <= limit) return { has_next_page: false };
  return { has_next_page: true, next_cursor: encodeCursor(position(rows[limit - 1])) };
}
