import { Inject, Injectable } from '@nestjs/common';
import { Database, type Queryable } from '../database/database.js';
import type { RunState } from '../runs/run-state.js';

/** A state a run entered (run_transitions), with the run's fields the team streams filter on. */
export interface StateChange {
  id: number;
  run_id: string;
  team_id: string;
  previous_state: RunState | null;
  state: RunState;
  execution: number;
  worker_id: string | null;
  status_message: { message: string; error_code?: string; reason?: string } | null;
  at: Date;
  /** For the team streams' filters (run-stream-filter.ts); never sent. */
  run: {
    config_name: string | null;
    model_id: string | null;
    environment_id: string | null;
    skill_spec: string | null;
    source: string;
    factory_uid: string | null;
    metadata: Record<string, string> | null;
    created_at: Date;
    creator_uid: string | null;
  };
}

/** A state change of a team nobody watched: its id is all the reader needs (to know it missed none). */
export interface SkippedChange {
  id: number;
  team_id: string;
  run_id: null;
}

/** A conversation event of a run (run_events), as the run's stream sends it. */
export interface ConversationEvent {
  id: number;
  run_id: string;
  execution: number;
  type: string;
  role: string | null;
  kind: string | null;
  body: Record<string, unknown>;
  created_at: Date;
}

export interface Followup {
  message: string;
  mode: string | null;
  created_at: Date;
  delivered_at: Date | null;
}

/** A state change's columns (`t` its run_transitions row, `r` its run, `p` the run's creator) but its id and team. */
const CHANGE_COLUMNS = `t.run_id, t.previous_state, t.state, t.execution, t.worker_id, t.status_message, t.at,
       json_build_object('config_name', r.config_name, 'model_id', r.model_id, 'environment_id', r.environment_id,
                         'skill_spec', r.skill_spec, 'source', r.source, 'factory_uid', r.factory_uid,
                         'metadata', r.metadata,
                         'created_at', r.created_at, 'creator_uid', p.uid) AS run`;

const CHANGE_SELECT = `SELECT t.id::float8 AS id, t.team_id, ${CHANGE_COLUMNS}
  FROM run_transitions t JOIN runs r ON r.id = t.run_id LEFT JOIN principals p ON p.id = r.creator_id`;

const EVENT_COLUMNS = `e.id::float8 AS id, e.run_id, e.execution, e.type, e.role, e.kind, e.body, e.created_at`;

/** Pages of this many rows: a replay or a burst is read in steps, never at once. */
export const PAGE = 500;

/** What the timeline and the live streams read: run_transitions, run_events and run_followups. */
@Injectable()
export class RunActivityRepository {
  constructor(@Inject(Database) private readonly db: Database) {}

  /**
   * `read` in one snapshot (a read-only REPEATABLE READ transaction): state changes and conversation
   * events read there are what was committed at one moment, so a run's news is never half a report
   * (the messages of a statement without the state it also wrote, or the other way round).
   */
  inSnapshot<T>(read: (q: Queryable) => Promise<T>): Promise<T> {
    return this.db.transaction(async (tx) => {
      await tx.execute('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
      return read(tx);
    });
  }

  /** The run's state changes after `after`, in order (a page). */
  changesOfRun(runId: string, after: number, q: Queryable = this.db): Promise<StateChange[]> {
    return q.query<StateChange>(
      `${CHANGE_SELECT} WHERE t.run_id = $1 AND t.id > $2 ORDER BY t.id LIMIT ${PAGE}`,
      [runId, after],
    );
  }

  /** The team's state changes after `after`, in order (a page): a team stream's replay. */
  changesOfTeam(teamId: string, after: number): Promise<StateChange[]> {
    return this.db.query<StateChange>(
      `${CHANGE_SELECT} WHERE t.team_id = $1 AND t.id > $2 ORDER BY t.id LIMIT ${PAGE}`,
      [teamId, after],
    );
  }

  /**
   * Every state change id after `after` (a page): the process's one live reader, which must see every
   * id to know it missed none. Only the changes of `teams` (the teams someone watches) are read in
   * full; another team's is its id and team alone (`run_id` null), so runs no stream could want cost
   * the reader next to nothing.
   */
  changesAfter(
    after: number,
    teams: string[],
    q: Queryable = this.db,
  ): Promise<Array<StateChange | SkippedChange>> {
    return q.query<StateChange | SkippedChange>(
      `SELECT t.id::float8 AS id, t.team_id, c.*
         FROM run_transitions t
         LEFT JOIN LATERAL (
           SELECT ${CHANGE_COLUMNS} FROM runs r LEFT JOIN principals p ON p.id = r.creator_id
            WHERE t.team_id = ANY($2::uuid[]) AND r.id = t.run_id
           -- Kept a subquery: the team test gates it per row (a one-time filter), so another
           -- team's change never looks up its run; pulled up, it would filter after the lookup.
           OFFSET 0) c ON true
        WHERE t.id > $1 ORDER BY t.id LIMIT ${PAGE}`,
      [after, teams],
    );
  }

  /** The newest state change's id (0: none yet). */
  async lastChangeId(): Promise<number> {
    const [row] = await this.db.query<{ id: number }>(
      `SELECT coalesce(max(id), 0)::float8 AS id FROM run_transitions`,
    );
    return row!.id;
  }

  /** Conversation events of each run after its own cursor, in order per run (one statement for all runs). */
  eventsAfter(cursors: Map<string, number>, q: Queryable = this.db): Promise<ConversationEvent[]> {
    return q.query<ConversationEvent>(
      `SELECT ${EVENT_COLUMNS}
         FROM unnest($1::uuid[], $2::bigint[]) AS w(run_id, after)
         CROSS JOIN LATERAL (SELECT * FROM run_events e WHERE e.run_id = w.run_id AND e.id > w.after ORDER BY e.id LIMIT ${PAGE}) e
        ORDER BY e.id`,
      [[...cursors.keys()], [...cursors.values()]],
    );
  }

  /** The newest conversation event's id of a run (0: none yet). */
  async lastEventId(runId: string): Promise<number> {
    const [row] = await this.db.query<{ id: number }>(
      `SELECT coalesce(max(id), 0)::float8 AS id FROM run_events WHERE run_id = $1`,
      [runId],
    );
    return row!.id;
  }

  followups(runId: string): Promise<Followup[]> {
    return this.db.query<Followup>(
      `SELECT message, mode, created_at, delivered_at FROM run_followups WHERE run_id = $1 ORDER BY created_at, id`,
      [runId],
    );
  }

  /** Whether the run exists in the team (a stream or timeline of another team's run is a 404). */
  async runInTeam(teamId: string, runId: string): Promise<boolean> {
    const rows = await this.db.query(`SELECT 1 FROM runs WHERE id = $1 AND team_id = $2`, [runId, teamId]);
    return rows.length > 0;
  }
}
