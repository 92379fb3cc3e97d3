import { paramRefs, type Queryable, type StatementPart } from '../../database/database.js';
import type { TranscriptBudget } from '../protocol/assignment.js';
import { eventBytes, type HarnessEvent } from '../protocol/harness-protocol.js';
import { artifactAction } from './artifact-events.js';
import { transcriptNote } from './run-decisions.js';

/** How a budgeted append went: whether the worker still held the run, and how many events were stored. */
export interface AppendedOutput {
  held: boolean;
  kept: number;
}

/**
 * A run's conversation as its workers write it: harness events appended to `run_events` (per
 * execution, in order), within the run's transcript budget, and follow-ups handed to the harness
 * (delivered, then recorded as the user's messages).
 */
export class RunEventsRepository {
  /**
   * Appends a harness's events to a run's execution, in order, while `leaseOwner` holds it, as far as
   * its transcript budget goes (appendOutputPart).
   */
  async appendOutput(
    q: Queryable,
    runId: string,
    execution: number,
    events: HarnessEvent[],
    now: Date,
    leaseOwner: string,
    budget: TranscriptBudget,
  ): Promise<AppendedOutput> {
    const part = this.appendOutputPart(runId, execution, events, now, leaseOwner, budget, 1);
    const [row] = await q.query<{ held: boolean; kept: number | null }>(
      `WITH ${part.ctes} SELECT EXISTS (SELECT 1 FROM usage) AS held, (SELECT last_kept FROM usage) AS kept`,
      part.params,
    );
    return { held: row!.held, kept: row!.kept ?? 0 };
  }

  /**
   * `appendOutput` as CTEs (`usage`, `new_events`) of a larger statement, parameters numbered from
   * `$first`. The budget is counted here, by the service, from what it stores (eventBytes of each
   * event received; never a worker's count): `run_transcript_usage` holds what the run stored so far,
   * and its upsert takes the row's lock, so that reports of one run, however many at once, are
   * counted one after the other. The events that fit (a prefix: transcript_fit) are inserted; at the
   * first that does not, one note (transcriptNote) instead, and nothing more for the run after it.
   */
  appendOutputPart(
    runId: string,
    execution: number,
    events: HarnessEvent[],
    now: Date,
    leaseOwner: string,
    budget: TranscriptBudget,
    first: number,
  ): StatementPart {
    const note: HarnessEvent = { type: 'message', role: 'system', text: transcriptNote(budget) };
    const cols = eventColumns([...events, note]);
    let sum = 0;
    const upto = events.map((e) => (sum += eventBytes(e)));
    const $ = paramRefs(first);
    const fit = (used: string) =>
      `transcript_fit(${used}, ${$(9)}::bigint[], ${$(10)}::bigint, ${$(11)}::int)`;
    return {
      ctes: `usage AS (
       INSERT INTO run_transcript_usage AS u (run_id, bytes, events, truncated, last_kept, last_noted)
       SELECT r.id, coalesce((${$(9)}::bigint[])[f.k], 0), f.k, f.k < ${$(12)}, f.k, f.k < ${$(12)}
         FROM runs r CROSS JOIN LATERAL (SELECT ${fit('0, 0, false')} AS k) f
        WHERE r.id = ${$(1)} AND r.execution = ${$(3)} AND r.lease_owner = ${$(2)}
       ON CONFLICT (run_id) DO UPDATE SET (last_kept, bytes, events, truncated, last_noted) =
         (SELECT f.k, u.bytes + coalesce((${$(9)}::bigint[])[f.k], 0), u.events + f.k,
                 u.truncated OR f.k < ${$(12)}, NOT u.truncated AND f.k < ${$(12)}
            FROM (SELECT ${fit('u.bytes, u.events, u.truncated')} AS k) f)
       RETURNING run_id, last_kept, last_noted),
     new_events AS (
       INSERT INTO run_events (run_id, team_id, execution, type, role, kind, body, created_at)
       SELECT r.id, r.team_id, ${$(3)}, e.type, e.role, e.kind, e.body, ${$(4)}
         FROM usage JOIN runs r ON r.id = usage.run_id,
              unnest(${$(5)}::text[], ${$(6)}::text[], ${$(7)}::text[], ${$(8)}::jsonb[]) WITH ORDINALITY AS e(type, role, kind, body, n)
        WHERE e.n <= usage.last_kept OR (e.n = ${$(12)} + 1 AND usage.last_noted)
        ORDER BY e.n
       RETURNING 1)`,
      params: [
        runId,
        leaseOwner,
        execution,
        now,
        cols.types,
        cols.roles,
        cols.kinds,
        cols.bodies,
        upto,
        budget.bytes,
        budget.events,
        events.length,
      ],
    };
  }

  /** Appends events to a run's execution, in order, outside any budget (the user's follow-ups). Returns how many. */
  async append(
    q: Queryable,
    runId: string,
    execution: number,
    events: HarnessEvent[],
    now: Date,
  ): Promise<number> {
    if (!events.length) return 0;
    const cols = eventColumns(events);
    const [row] = await q.query<{ n: number }>(
      `WITH new_events AS (
       INSERT INTO run_events (run_id, team_id, execution, type, role, kind, body, created_at)
       SELECT r.id, r.team_id, $2, e.type, e.role, e.kind, e.body, $3
         FROM runs r, unnest($4::text[], $5::text[], $6::text[], $7::jsonb[]) WITH ORDINALITY AS e(type, role, kind, body, n)
        WHERE r.id = $1 AND r.execution = $2
        ORDER BY e.n
       RETURNING 1) SELECT count(*)::int AS n FROM new_events`,
      [runId, execution, now, cols.types, cols.roles, cols.kinds, cols.bodies],
    );
    return row!.n;
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
