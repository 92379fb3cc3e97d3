import { paramRefs, type Queryable, type StatementPart } from '../database/database.js';
import type { HarnessEvent } from './harness-protocol.js';
import { artifactAction } from './artifact-events.js';

/**
 * A run's conversation as its workers write it: harness events appended to `run_events` (per
 * execution, in order), and follow-ups handed to the harness (delivered, then recorded as the user's
 * messages).
 */
export class RunEventsRepository {
  /** Appends events to a run's execution, in order; with `leaseOwner`, only while that worker holds it. Returns how many. */
  async append(
    q: Queryable,
    runId: string,
    execution: number,
    events: HarnessEvent[],
    now: Date,
    leaseOwner?: string,
  ): Promise<number> {
    if (!events.length) return 0;
    const part = this.appendPart(runId, execution, events, now, leaseOwner, 1);
    const [row] = await q.query<{ n: number }>(
      `WITH ${part.ctes} SELECT count(*)::int AS n FROM new_events`,
      part.params,
    );
    return row!.n;
  }

  /** `append` as a CTE (`new_events`) of a larger statement, parameters numbered from `$first`. */
  appendPart(
    runId: string,
    execution: number,
    events: HarnessEvent[],
    now: Date,
    leaseOwner: string | undefined,
    first: number,
  ): StatementPart {
    const cols = eventColumns(events);
    const $ = paramRefs(first);
    return {
      ctes: `new_events AS (
       INSERT INTO run_events (run_id, team_id, execution, type, role, kind, body, created_at)
       SELECT r.id, r.team_id, ${$(3)}, e.type, e.role, e.kind, e.body, ${$(4)}
         FROM runs r, unnest(${$(5)}::text[], ${$(6)}::text[], ${$(7)}::text[], ${$(8)}::jsonb[]) WITH ORDINALITY AS e(type, role, kind, body, n)
        WHERE r.id = ${$(1)} AND r.execution = ${$(3)} AND (${$(2)}::text IS NULL OR r.lease_owner = ${$(2)})
        ORDER BY e.n
       RETURNING 1)`,
      params: [runId, leaseOwner ?? null, execution, now, cols.types, cols.roles, cols.kinds, cols.bodies],
    };
  }

  /** Follow-ups not yet delivered, oldest first, marked delivered and recorded as the user's messages. */
  async deliverFollowups(tx: Queryable, runId: string, execution: number, now: Date): Promise<string[]> {
    const rows = await tx.query<{ message: string; created_at: Date }>(
      `UPDATE run_followups SET delivered_at = $2
        WHERE id IN (SELECT id FROM run_followups WHERE run_id = $1 AND delivered_at IS NULL ORDER BY created_at FOR UPDATE)
        RETURNING message, created_at`,
      [runId, now],
    );
    const messages = rows.sort((a, b) => +a.created_at - +b.created_at).map((r) => r.message);
    await this.append(
      tx,
      runId,
      execution,
      messages.map((text) => ({ type: 'message', role: 'user', text })),
      now,
    );
    return messages;
  }
}

/** The events as columns for `unnest`: an action keeps only its input (its kind has a column). */
function eventColumns(events: HarnessEvent[]) {
  const out = {
    types: [] as string[],
    roles: [] as (string | null)[],
    kinds: [] as (string | null)[],
    bodies: [] as string[],
  };
  for (const e of events) {
    // An artifact is an `artifact` action in the conversation, its content left out (run_artifacts has it).
    const event = e.type === 'artifact' ? artifactAction(e.artifact) : e;
    out.types.push(event.type);
    out.roles.push(event.type === 'message' ? event.role : event.type === 'transcript' ? event.stream : null);
    out.kinds.push(event.type === 'action' ? event.kind : null);
    out.bodies.push(JSON.stringify(event.type === 'action' ? { input: event.input } : event));
  }
  return out;
}
