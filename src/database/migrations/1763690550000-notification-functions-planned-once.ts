import type { MigrationInterface, QueryRunner } from 'typeorm';
import { redefineFunction } from './redefine-function.js';

/**
 * The two functions the message-making triggers call (NotificationMessagesAtTheChange) become
 * PL/pgSQL, their statements unchanged. Written in SQL, neither can be inlined into its caller (one
 * inserts, the other holds a subquery), and PostgreSQL up to 17 keeps the plan of such a function
 * only for the statement that calls it: every state change of a team with an endpoint planned an
 * INSERT … SELECT and a subquery again, in its own transaction (measured: about 100 µs a call for the
 * insert against 25 in PL/pgSQL, 30 against 12 for the run's event). PL/pgSQL keeps its plans for the
 * connection's life. That planning was most of what making a team's messages cost its ingress, and
 * other teams' on the same cores (docs/notifications.md, "Figures").
 *
 * Each body is taken from the function as it stands and wrapped, so the statements are written once
 * (in NotificationMessagesAtTheChange) and `down` unwraps them.
 */
const FUNCTIONS = [
  // [signature, result, how the SQL body is wrapped in PL/pgSQL: before, after]
  ['notification_messages_of(events jsonb)', 'void', 'BEGIN ', '; END'],
  ['notification_run_event(r runs, previous_state text)', 'jsonb', 'BEGIN RETURN (', '); END'],
] as const;

export class NotificationFunctionsPlannedOnce1763690550000 implements MigrationInterface {
  name = 'NotificationFunctionsPlannedOnce1763690550000';

  async up(db: QueryRunner): Promise<void> {
    for (const [signature, result, before, after] of FUNCTIONS)
      await redefineFunction(db, signature, result, 'plpgsql', (body) => before + body.trim() + after);
  }

  async down(db: QueryRunner): Promise<void> {
    for (const [signature, result, before, after] of FUNCTIONS)
      await redefineFunction(db, signature, result, 'sql', (body) =>
        body.slice(before.length, body.length - after.length),
      );
  }
}
