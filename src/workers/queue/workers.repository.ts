import type { Database } from '../../database/database.js';

/** Who is asking: a worker process, serving one worker host (for one team when self-hosted). */
export interface WorkerIdentity {
  id: string;
  host: string;
  /** Self-hosted workers are scoped to the team of their API key; service-hosted ones serve all. */
  teamId: string | null;
  /** A service-hosted worker's slots: counted in the total that teams share (the registry). */
  slots?: number;
  /**
   * The harnesses it can run: `oz` (its harness command) and the built-in ones whose CLI it has, with
   * their versions. Undefined (an older worker): `oz` only.
   */
  harnesses?: WorkerHarness[];
}

export interface WorkerHarness {
  type: string;
  version?: string;
}

/** The harness types a worker runs (the claim takes only runs of these). */
export const harnessTypesOf = (w: WorkerIdentity): string[] =>
  w.harnesses?.length ? [...new Set(['oz', ...w.harnesses.map((h) => h.type)])] : ['oz'];

/** A worker host of a team, as the connected-workers list shows it. */
export interface ConnectedHost {
  worker_host: string;
  connection_count: number;
  connected_at: string;
  last_seen_at: string;
  /** The harnesses its workers can run, with their CLIs' versions. */
  harnesses: WorkerHarness[];
}

/**
 * The worker registry, the `workers` table's one home: who is connected, last seen when, with how
 * many slots. A worker is registered on connect and on every claim and heartbeat; the fair claim
 * counts the live ones' slots.
 */
export class WorkersRepository {
  constructor(private readonly db: Database) {}

  async register(w: WorkerIdentity, now: Date): Promise<void> {
    await this.db.execute(
      `INSERT INTO workers (id, worker_host, team_id, self_hosted, connected_at, last_seen_at, slots, harnesses)
       VALUES ($1, $2, $3, $4, $5, $5, $6, $7)
       ON CONFLICT (id) DO UPDATE SET last_seen_at = $5, slots = $6, harnesses = coalesce($7, workers.harnesses)`,
      [
        w.id,
        w.host,
        w.teamId,
        w.teamId !== null,
        now,
        w.slots ?? 0,
        w.harnesses ? JSON.stringify(w.harnesses) : null,
      ],
    );
  }

  async unregister(w: WorkerIdentity): Promise<void> {
    await this.db.execute(`DELETE FROM workers WHERE id = $1`, [w.id]);
  }

  /** Forgets workers not seen since `before`. */
  async forget(before: Date): Promise<void> {
    await this.db.execute(`DELETE FROM workers WHERE last_seen_at < $1`, [before]);
  }

  /**
   * The harnesses the live workers (seen after `liveSince`) that may run a team's runs advertise:
   * the service-hosted ones (any team's) and the team's own self-hosted ones, never another team's.
   * One row per harness type, version and place (`service`, or a self-hosted worker host).
   */
  async harnessesFor(
    teamId: string,
    liveSince: Date,
  ): Promise<Array<{ type: string; version: string | null; where: string }>> {
    return this.db.query(
      `SELECT DISTINCT h->>'type' AS type, h->>'version' AS version,
              CASE WHEN self_hosted THEN worker_host ELSE 'service' END AS "where"
         FROM workers, jsonb_array_elements(coalesce(harnesses, '[]')) h
        WHERE (team_id = $1 OR NOT self_hosted) AND last_seen_at > $2 AND jsonb_typeof(h) = 'object'
        ORDER BY 3, 1, 2`,
      [teamId, liveSince],
    );
  }

  /**
   * What the live workers (seen after `liveSince`) offer, as one comparable text: each one's host,
   * team and harnesses. It changes when a worker comes, goes or changes its harnesses.
   */
  async liveOffer(liveSince: Date): Promise<string> {
    const [row] = await this.db.query<{ offer: string | null }>(
      `SELECT string_agg(worker_host || ' ' || coalesce(team_id::text, '-') || ' ' || coalesce(harnesses::text, '-'),
                         E'\n' ORDER BY worker_host, team_id, harnesses::text) AS offer
         FROM workers WHERE last_seen_at > $1`,
      [liveSince],
    );
    return row?.offer ?? '';
  }

  /** A team's self-hosted worker hosts with a worker seen after `liveSince`. */
  async connectedSelfHosted(teamId: string, liveSince: Date): Promise<ConnectedHost[]> {
    const rows = await this.db.query<{
      worker_host: string;
      n: string;
      connected_at: Date;
      last_seen_at: Date;
      harnesses: WorkerHarness[] | null;
    }>(
      `SELECT worker_host, count(*) AS n, min(connected_at) AS connected_at, max(last_seen_at) AS last_seen_at,
              (SELECT jsonb_agg(DISTINCT h) FROM workers w2, jsonb_array_elements(coalesce(w2.harnesses, '[{"type":"oz"}]')) h
                WHERE w2.team_id = $1 AND w2.worker_host = workers.worker_host AND w2.last_seen_at > $2) AS harnesses
         FROM workers WHERE team_id = $1 AND self_hosted AND last_seen_at > $2
        GROUP BY worker_host ORDER BY worker_host`,
      [teamId, liveSince],
    );
    return rows.map((r) => ({
      worker_host: r.worker_host,
      connection_count: Number(r.n),
      connected_at: r.connected_at.toISOString(),
      last_seen_at: r.last_seen_at.toISOString(),
      harnesses: r.harnesses ?? [{ type: 'oz' }],
    }));
  }
}
