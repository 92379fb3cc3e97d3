import { randomUUID } from 'node:crypto';
import type { Database, Queryable } from '../database/database.js';
import type { RunEvent, RunState } from '../runs/run-state.js';
import { skillName } from '../runs/runs.service.js';
import type { RunsRepository } from '../runs/runs.repository.js';
import type { Assignment, Control, Outcome } from './assignment.js';
import type { HarnessEvent } from './harness-protocol.js';

/** Who is asking: a worker process, serving one worker host (for one team when self-hosted). */
export interface WorkerIdentity {
  id: string;
  host: string;
  /** Self-hosted workers are scoped to the team of their API key; service-hosted ones serve all. */
  teamId: string | null;
}

const HELD: RunState[] = ['CLAIMED', 'INPROGRESS', 'BLOCKED'];
const LAST_LINES_IN_MESSAGE = 5;

/**
 * The database side of run execution: claim, lease, events, control, end, and the reaper. Every
 * state change goes through RunsRepository.transition (the state machine, compare-and-set).
 */
export class WorkerRunsService {
  constructor(
    private readonly db: Database,
    private readonly runs: RunsRepository,
    private readonly leaseMs: number,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async register(w: WorkerIdentity): Promise<void> {
    const now = this.now();
    await this.db.execute(
      `INSERT INTO workers (id, worker_host, team_id, self_hosted, connected_at, last_seen_at)
       VALUES ($1, $2, $3, $4, $5, $5)
       ON CONFLICT (id) DO UPDATE SET last_seen_at = $5`,
      [w.id, w.host, w.teamId, w.teamId !== null, now],
    );
  }

  async unregister(w: WorkerIdentity): Promise<void> {
    await this.db.execute(`DELETE FROM workers WHERE id = $1`, [w.id]);
  }

  /** Claims up to `max` of the oldest QUEUED runs of the worker's host (SKIP LOCKED: no waiting). */
  async claim(w: WorkerIdentity, max: number): Promise<Assignment[]> {
    if (max <= 0) return [];
    const claimed = await this.db.transaction(async (tx) => {
      const now = this.now();
      const rows = await tx.query<{ id: string }>(
        `SELECT id FROM runs WHERE state = 'QUEUED' AND worker_host = $1 AND ($2::uuid IS NULL OR team_id = $2)
          ORDER BY created_at LIMIT $3 FOR UPDATE SKIP LOCKED`,
        [w.host, w.teamId, max],
      );
      const ids: string[] = [];
      for (const { id } of rows) {
        if (!(await this.runs.transition(tx, id, 'QUEUED', 'claim', now))) continue;
        await tx.execute(
          `UPDATE runs SET lease_owner = $2, lease_expires_at = $3, claimed_at = $4, execution = execution + 1,
                  session_id = coalesce(session_id, $5), status_message = NULL
            WHERE id = $1`,
          [id, w.id, new Date(now.getTime() + this.leaseMs), now, randomUUID()],
        );
        ids.push(id);
      }
      return ids;
    });
    const out: Assignment[] = [];
    for (const id of claimed) out.push(await this.assignment(id));
    return out;
  }

  private async assignment(runId: string): Promise<Assignment> {
    const [run] = await this.db.query(
      `SELECT id, team_id, prompt, agent_config, execution, session_id, skill_spec FROM runs WHERE id = $1`,
      [runId],
    );
    const config = (run.agent_config ?? {}) as Record<string, unknown>;
    const followups = await this.takeFollowups(this.db, runId, run.team_id, run.execution);
    const attachments = await this.db.query<{ file_name: string; content: Buffer }>(
      `SELECT file_name, content FROM run_attachments WHERE run_id = $1 ORDER BY file_name`,
      [runId],
    );
    const skills = await this.db.query<{ factory: string; path: string; content: string }>(
      `SELECT f.name AS factory, s.path, s.content FROM factory_skills s JOIN factories f ON f.id = s.factory_id
        WHERE f.team_id = $1 AND s.deleted_at IS NULL ORDER BY f.name, s.path`,
      [run.team_id],
    );
    let basePrompt = typeof config.base_prompt === 'string' ? config.base_prompt : undefined;
    if (run.skill_spec) {
      const skill = await this.resolveSkill(run.team_id, run.skill_spec);
      if (skill) basePrompt = basePrompt ? `${skill}\n\n${basePrompt}` : skill;
    }
    const history =
      run.execution > 1
        ? await this.db.query<{ role: string; text: string }>(
            `SELECT role, body->>'text' AS text FROM run_events
              WHERE run_id = $1 AND type = 'message' AND execution < $2 ORDER BY id`,
            [runId, run.execution],
          )
        : [];
    // The prompt and the follow-ups it carries open this execution's part of the conversation.
    await this.insertEvents(this.db, runId, run.team_id, run.execution, [
      ...(run.execution === 1 ? [{ type: 'message' as const, role: 'user', text: run.prompt }] : []),
    ]);
    return {
      run_id: runId,
      team_id: run.team_id,
      execution: run.execution,
      session_id: run.session_id,
      prompt: run.prompt,
      base_prompt: basePrompt,
      agent_config: config,
      followups,
      attachments: attachments.map((a) => ({ file_name: a.file_name, data: a.content.toString('base64') })),
      skills,
      history,
      idle_timeout_minutes:
        typeof config.idle_timeout_minutes === 'number' ? config.idle_timeout_minutes : undefined,
    };
  }

  /**
   * `owner/repo:name` or `owner/repo:path/SKILL.md` → the skill's text, from a factory of the team
   * whose repository is owner/repo (or, for a local factory, whose name is repo).
   */
  async resolveSkill(teamId: string, spec: string): Promise<string | undefined> {
    const [repo, rest] = spec.split(':', 2);
    if (!rest) return undefined;
    const name = skillName(spec);
    const rows = await this.db.query<{ content: string; repo_url: string; fname: string; path: string }>(
      `SELECT s.content, f.repo_url, f.name AS fname, s.path FROM factory_skills s JOIN factories f ON f.id = s.factory_id
        WHERE f.team_id = $1 AND s.deleted_at IS NULL AND (s.path = $2 OR s.name = $3)`,
      [teamId, rest, name],
    );
    const repoName = repo.split('/')[1] ?? repo;
    const matches = (r: { repo_url: string; fname: string }) =>
      r.repo_url.replace(/\.git$/, '').replace(/\/+$/, '').endsWith(repo) || r.fname === repoName;
    const exact = rows.filter(matches).find((r) => r.path === rest) ?? rows.filter(matches)[0];
    return exact?.content;
  }

  async started(w: WorkerIdentity, runId: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      if (!(await this.holds(tx, w, runId, 'CLAIMED'))) return;
      const now = this.now();
      await this.runs.transition(tx, runId, 'CLAIMED', 'start', now);
      await tx.execute(`UPDATE runs SET started_at = coalesce(started_at, $2) WHERE id = $1`, [runId, now]);
    });
  }

  async record(w: WorkerIdentity, runId: string, execution: number, events: HarnessEvent[]): Promise<void> {
    if (!events.length) return;
    const [run] = await this.db.query<{ team_id: string }>(
      `SELECT team_id FROM runs WHERE id = $1 AND lease_owner = $2`,
      [runId, w.id],
    );
    if (!run) return;
    await this.insertEvents(this.db, runId, run.team_id, execution, events);
    const artifacts = events
      .filter((e) => e.type === 'action' && e.kind === 'artifact')
      .map((e) => (e as { input: Record<string, unknown> }).input);
    if (artifacts.length) {
      await this.db.execute(
        `UPDATE runs SET artifacts = coalesce(artifacts, '[]'::jsonb) || $2::jsonb WHERE id = $1`,
        [runId, JSON.stringify(artifacts)],
      );
    }
    const blocked = events.find((e) => e.type === 'status');
    if (blocked) {
      await this.db.transaction(async (tx) => {
        if (await this.holds(tx, w, runId, 'INPROGRESS'))
          await this.runs.transition(tx, runId, 'INPROGRESS', 'block', this.now(), {
            statusMessage: { message: blocked.message },
          });
      });
    }
  }

  /** Follow-ups not yet delivered (a BLOCKED run resumes), or `stop` when the run is no longer ours. */
  async control(w: WorkerIdentity, runId: string): Promise<Control> {
    return this.db.transaction(async (tx) => {
      const [run] = await tx.query<{ state: RunState; lease_owner: string; team_id: string; execution: number }>(
        `SELECT state, lease_owner, team_id, execution FROM runs WHERE id = $1 FOR UPDATE`,
        [runId],
      );
      if (!run || run.lease_owner !== w.id || !HELD.includes(run.state)) return { stop: true, followups: [] };
      const followups = await this.takeFollowups(tx, runId, run.team_id, run.execution);
      if (followups.length && run.state === 'BLOCKED') {
        await this.runs.transition(tx, runId, 'BLOCKED', 'resume', this.now());
        await tx.execute(`UPDATE runs SET status_message = NULL WHERE id = $1`, [runId]);
      }
      return { stop: false, followups };
    });
  }

  async heartbeat(w: WorkerIdentity, runIds: string[]): Promise<void> {
    const now = this.now();
    await this.register(w);
    if (runIds.length)
      await this.db.execute(
        `UPDATE runs SET lease_expires_at = $3 WHERE id = ANY($1::uuid[]) AND lease_owner = $2 AND state = ANY($4::text[])`,
        [runIds, w.id, new Date(now.getTime() + this.leaseMs), HELD],
      );
  }

  /** The harness ended: its exit decides SUCCEEDED or FAILED, unless the run moved on (cancelled, lost). */
  async finish(w: WorkerIdentity, runId: string, execution: number, outcome: Outcome): Promise<void> {
    await this.db.transaction(async (tx) => {
      const [run] = await tx.query<{ state: RunState; lease_owner: string; team_id: string; execution: number }>(
        `SELECT state, lease_owner, team_id, execution FROM runs WHERE id = $1 FOR UPDATE`,
        [runId],
      );
      if (!run || run.lease_owner !== w.id || run.execution !== execution) return;
      await tx.execute(`UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL WHERE id = $1`, [runId]);
      if (!HELD.includes(run.state)) return;
      const now = this.now();
      let state = run.state;
      const step = async (event: RunEvent, message?: { message: string; error_code?: string; retryable?: boolean }) => {
        const next = await this.runs.transition(tx, runId, state, event, now, message ? { statusMessage: message } : {});
        if (next) state = next;
      };
      if (outcome.stoppedBy === 'shutdown') {
        return step('lose', { message: `The worker ${w.id} shut down while running this run`, error_code: 'worker_lost', retryable: true });
      }
      if (state === 'BLOCKED') await step('resume');
      if (state === 'CLAIMED') await step('start');
      const tail = outcome.lastLines.slice(-LAST_LINES_IN_MESSAGE).join('\n');
      if (outcome.stoppedBy === 'idle') {
        return step('fail', {
          message: 'The agent was idle (no output, no input) for longer than idle_timeout_minutes and was stopped',
          error_code: 'idle_timeout',
        });
      }
      if (outcome.exitCode === 0) {
        return step('succeed', { message: outcome.result?.message || 'The agent finished' });
      }
      const how = outcome.exitCode === null ? `was killed by ${outcome.signal}` : `exited with status ${outcome.exitCode}`;
      return step('fail', {
        message: `The agent ${how}${tail ? `:\n${tail}` : ''}`,
        error_code: 'agent_failed',
      });
    });
  }

  /** Runs whose lease lapsed end as ERROR (retryable); returns how many. */
  async reap(): Promise<number> {
    return this.db.transaction(async (tx) => {
      const now = this.now();
      const rows = await tx.query<{ id: string; state: RunState; lease_owner: string; lease_expires_at: Date }>(
        `SELECT id, state, lease_owner, lease_expires_at FROM runs
          WHERE state = ANY($1::text[]) AND lease_expires_at < $2 ORDER BY lease_expires_at LIMIT 100 FOR UPDATE SKIP LOCKED`,
        [HELD, now],
      );
      for (const r of rows) {
        await this.runs.transition(tx, r.id, r.state, 'lose', now, {
          statusMessage: {
            message: `The worker ${r.lease_owner} stopped renewing its lease (expired ${r.lease_expires_at.toISOString()}); the run was lost`,
            error_code: 'lease_expired',
            retryable: true,
          },
        });
        await tx.execute(`UPDATE runs SET lease_owner = NULL, lease_expires_at = NULL WHERE id = $1`, [r.id]);
      }
      return rows.length;
    });
  }

  /** QUEUED runs for a self-hosted host that no connected worker serves say so in their status message. */
  async markUnservedHosts(): Promise<void> {
    const seenAfter = new Date(this.now().getTime() - this.leaseMs);
    await this.db.execute(
      `UPDATE runs r SET status_message = jsonb_build_object('message',
              'Waiting for self-hosted worker "' || r.worker_host || '": no worker with this id is connected')
        WHERE r.state = 'QUEUED' AND r.worker_host <> 'warp' AND r.status_message IS NULL
          AND NOT EXISTS (SELECT 1 FROM workers w WHERE w.team_id = r.team_id AND w.worker_host = r.worker_host
                            AND w.last_seen_at > $1)`,
      [seenAfter],
    );
    await this.db.execute(
      `UPDATE runs r SET status_message = NULL
        WHERE r.state = 'QUEUED' AND r.worker_host <> 'warp' AND r.status_message->>'message' LIKE 'Waiting for self-hosted worker%'
          AND EXISTS (SELECT 1 FROM workers w WHERE w.team_id = r.team_id AND w.worker_host = r.worker_host
                        AND w.last_seen_at > $1)`,
      [seenAfter],
    );
    await this.db.execute(`DELETE FROM workers WHERE last_seen_at < $1`, [new Date(seenAfter.getTime() - 3600_000)]);
  }

  async connectedSelfHosted(teamId: string): Promise<
    Array<{ worker_host: string; connection_count: number; connected_at: string; last_seen_at: string }>
  > {
    const rows = await this.db.query<{ worker_host: string; n: string; connected_at: Date; last_seen_at: Date }>(
      `SELECT worker_host, count(*) AS n, min(connected_at) AS connected_at, max(last_seen_at) AS last_seen_at
         FROM workers WHERE team_id = $1 AND self_hosted AND last_seen_at > $2
        GROUP BY worker_host ORDER BY worker_host`,
      [teamId, new Date(this.now().getTime() - this.leaseMs)],
    );
    return rows.map((r) => ({
      worker_host: r.worker_host,
      connection_count: Number(r.n),
      connected_at: r.connected_at.toISOString(),
      last_seen_at: r.last_seen_at.toISOString(),
    }));
  }

  private async holds(tx: Queryable, w: WorkerIdentity, runId: string, state: RunState): Promise<boolean> {
    const rows = await tx.query(
      `SELECT 1 FROM runs WHERE id = $1 AND lease_owner = $2 AND state = $3 FOR UPDATE`,
      [runId, w.id, state],
    );
    return rows.length > 0;
  }

  private async takeFollowups(tx: Queryable, runId: string, teamId: string, execution: number): Promise<string[]> {
    const rows = await tx.query<{ message: string; created_at: Date }>(
      `UPDATE run_followups SET delivered_at = $2
        WHERE id IN (SELECT id FROM run_followups WHERE run_id = $1 AND delivered_at IS NULL ORDER BY created_at FOR UPDATE)
        RETURNING message, created_at`,
      [runId, this.now()],
    );
    const messages = rows.sort((a, b) => +a.created_at - +b.created_at).map((r) => r.message);
    await this.insertEvents(
      tx,
      runId,
      teamId,
      execution,
      messages.map((text) => ({ type: 'message', role: 'user', text })),
    );
    return messages;
  }

  private async insertEvents(
    q: Queryable,
    runId: string,
    teamId: string,
    execution: number,
    events: HarnessEvent[],
  ): Promise<void> {
    if (!events.length) return;
    const now = this.now();
    const values: unknown[] = [];
    const rows = events.map((e, i) => {
      const role = e.type === 'message' ? e.role : e.type === 'transcript' ? e.stream : null;
      const kind = e.type === 'action' ? e.kind : null;
      const body = e.type === 'action' ? { input: e.input } : e;
      values.push(e.type, role, kind, JSON.stringify(body));
      const b = 5 + i * 4;
      return `($1, $2, $3, $${b}, $${b + 1}, $${b + 2}, $${b + 3}::jsonb, $4)`;
    });
    await q.execute(
      `INSERT INTO run_events (run_id, team_id, execution, type, role, kind, body, created_at) VALUES ${rows.join(', ')}`,
      [runId, teamId, execution, now, ...values],
    );
  }
}
