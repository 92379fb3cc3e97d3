import { Inject, Injectable } from '@nestjs/common';
import { newUuid } from '../common/ids.js';
import { Database, type Queryable } from '../database/database.js';
import { artifactItem, type ArtifactReport, type ArtifactType } from './artifact.js';

export interface StoredArtifact {
  id: string;
  runId: string;
  execution: number;
  artifactType: ArtifactType;
  data: Record<string, unknown>;
  contentType: string | null;
  handoff: boolean;
  createdAt: Date;
}

const COLUMNS = `a.id, a.run_id, a.execution, a.artifact_type, a.data, a.content_type, a.handoff, a.created_at`;

function toArtifact(row: Record<string, unknown>): StoredArtifact {
  return {
    id: row.id as string,
    runId: row.run_id as string,
    execution: row.execution as number,
    artifactType: row.artifact_type as ArtifactType,
    data: row.data as Record<string, unknown>,
    contentType: row.content_type as string | null,
    handoff: row.handoff as boolean,
    createdAt: row.created_at as Date,
  };
}

/** A handoff file with its content. */
export interface HandoffFile {
  filename: string;
  bytes: Buffer;
}

/** $1 the run, $2 its team: the handoff files of its latest ended execution, oldest first. */
const HANDOFF_OF_RUN = `FROM run_artifacts a JOIN runs r ON r.id = a.run_id
  WHERE a.run_id = $1 AND r.team_id = $2 AND a.team_id = $2 AND a.handoff
    AND a.execution = (SELECT max(b.execution) FROM run_artifacts b WHERE b.run_id = $1 AND b.handoff
                         AND (b.execution < r.execution OR r.state IN ('SUCCEEDED', 'FAILED', 'ERROR', 'CANCELLED')))
  ORDER BY a.created_at, a.id`;

/**
 * A run's `artifacts` as RUN_COLUMNS selects it (`r` is runs), in the order they were reported: each
 * row's uid, kind, data and time, which `runArtifactItems` shapes; null when the run left none. One
 * index probe per run (run_artifacts_run), so a page of runs stays one statement.
 */
export const RUN_ARTIFACTS_COLUMN = `(SELECT jsonb_agg(jsonb_build_object('id', a.id, 'artifact_type', a.artifact_type,
    'data', a.data, 'created_at', a.created_at) ORDER BY a.created_at, a.position)
    FROM run_artifacts a WHERE a.run_id = r.id) AS artifacts`;

/** The run item's `artifacts[]` (ArtifactItem) from RUN_ARTIFACTS_COLUMN. */
export function runArtifactItems(column: unknown): Record<string, unknown>[] | null {
  if (!Array.isArray(column)) return null;
  return (
    column as Array<{
      id: string;
      artifact_type: ArtifactType;
      data: Record<string, unknown>;
      created_at: string;
    }>
  ).map((a) => artifactItem(a.id, a.artifact_type, a.data, new Date(a.created_at)));
}

/**
 * A run's artifacts, the one home of them: each stored with its content (what a download returns),
 * listed on the run (RUN_ARTIFACTS_COLUMN) and filtered by `artifact_type`.
 */
@Injectable()
export class RunArtifacts {
  constructor(@Inject(Database) private readonly db: Database) {}

  /** Stores the artifacts one report of an execution brought, in the order it gave them. */
  async record(
    q: Queryable,
    runId: string,
    execution: number,
    reports: ArtifactReport[],
    now: Date,
  ): Promise<void> {
    if (!reports.length) return;
    await q.execute(
      `INSERT INTO run_artifacts (id, run_id, team_id, execution, artifact_type, data, content_type, content, handoff, position, created_at)
         SELECT a.id, r.id, r.team_id, $2, a.t, a.d, a.ct, a.c, a.h, a.position, $3
           FROM runs r, unnest($4::uuid[], $5::text[], $6::jsonb[], $7::text[], $8::bytea[], $9::boolean[])
                        WITH ORDINALITY AS a(id, t, d, ct, c, h, position)
          WHERE r.id = $1`,
      [
        runId,
        execution,
        now,
        reports.map(() => newUuid()),
        reports.map((r) => r.artifact_type),
        reports.map((r) => JSON.stringify(r.data)),
        reports.map((r) => r.content?.type ?? null),
        reports.map((r) => r.content?.bytes ?? null),
        reports.map((r) => r.handoff),
      ],
    );
  }

  /** One artifact of the team, or undefined (another team's is no different from none). */
  async find(teamId: string, uid: string): Promise<StoredArtifact | undefined> {
    const rows = await this.db.query(
      `SELECT ${COLUMNS} FROM run_artifacts a WHERE a.id = $1 AND a.team_id = $2`,
      [uid, teamId],
    );
    return rows[0] ? toArtifact(rows[0]) : undefined;
  }

  /** The run that most recently reported an external reference to this URL, in the team. */
  async runOfExternalReference(teamId: string, url: string): Promise<string | undefined> {
    const rows = await this.db.query<{ run_id: string }>(
      `SELECT run_id FROM run_artifacts
        WHERE team_id = $1 AND artifact_type = 'EXTERNAL_REFERENCE' AND data->>'url' = $2
        ORDER BY created_at DESC, id DESC LIMIT 1`,
      [teamId, url],
    );
    return rows[0]?.run_id;
  }

  /** An artifact's content, for a download whose signed link names it. */
  async content(uid: string): Promise<{ type: string; bytes: Buffer; name: string } | undefined> {
    const rows = await this.db.query<{ content_type: string; content: Buffer; data: { filename?: string } }>(
      `SELECT content_type, content, data FROM run_artifacts WHERE id = $1 AND content IS NOT NULL`,
      [uid],
    );
    const row = rows[0];
    return row && { type: row.content_type, bytes: row.content, name: row.data.filename ?? uid };
  }

  /** The text of a plan (stored as its content). */
  async text(uid: string): Promise<string> {
    const c = await this.content(uid);
    return c ? c.bytes.toString('utf8') : '';
  }

  /**
   * The handoff files of the run's latest ended execution: its current one once the run has ended,
   * else the one before (a running execution has not finished leaving files).
   */
  async handoff(teamId: string, runId: string): Promise<StoredArtifact[]> {
    const rows = await this.db.query(`SELECT ${COLUMNS} ${HANDOFF_OF_RUN}`, [runId, teamId]);
    return rows.map(toArtifact);
  }

  /**
   * The same files with their content, for the workspace of the run's next execution (a claimed
   * run's current execution has not ended, so these are what an earlier one left).
   */
  async handoffFiles(teamId: string, runId: string): Promise<HandoffFile[]> {
    const rows = await this.db.query<{ data: { filename?: string }; content: Buffer }>(
      `SELECT a.data, a.content ${HANDOFF_OF_RUN}`,
      [runId, teamId],
    );
    return rows.map((r) => ({ filename: r.data.filename ?? '', bytes: r.content }));
  }

  /**
   * The run a new run of a conversation continues (created with `conversation_id`): the conversation's
   * newest earlier run of the same team, or undefined (a run that starts its own conversation).
   */
  async predecessor(teamId: string, runId: string): Promise<string | undefined> {
    const rows = await this.db.query<{ id: string }>(
      `SELECT p.id FROM runs me JOIN runs p ON p.conversation_id = me.conversation_id AND p.team_id = me.team_id
        WHERE me.id = $1 AND me.team_id = $2 AND p.id <> me.id AND p.created_at <= me.created_at
        ORDER BY p.created_at DESC, p.id DESC LIMIT 1`,
      [runId, teamId],
    );
    return rows[0]?.id;
  }
}
