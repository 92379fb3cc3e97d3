import { Cron } from 'croner';

/**
 * A schedule's `cron_schedule`, in UTC: five fields (minute hour day-of-month month day-of-week, with
 * Vixie cron's OR of the two day fields), a nickname (`@hourly`, `@daily`, `@weekly`, `@monthly`,
 * `@yearly`/`@annually`), or `@every <duration>` (`15m`, `1h`, `1h30m`). Pure: the caller hands in
 * the time to count from. Parsing is croner's; only `@every` is ours (croner has no such form).
 */
export type CronSchedule = { next(after: Date): Date | null };

export type CronParse = { schedule: CronSchedule } | { error: string };

const MINUTE_MS = 60_000;
/** The longest `@every`: a year of minutes is already more than any cron field can say. */
const MAX_EVERY_MINUTES = 366 * 24 * 60;
const EVERY = /^@every\s+(?:(\d+)h)?(?:(\d+)m)?$/;

export function parseCron(expression: string): CronParse {
  const text = expression.trim();
  if (!text) return { error: 'the cron expression is empty' };
  if (text.startsWith('@every')) return parseEvery(text);
  if (text.startsWith('@')) {
    if (!/^@(hourly|daily|weekly|monthly|yearly|annually)$/.test(text))
      return {
        error: `"${text}" is not a known nickname: use @hourly, @daily, @weekly, @monthly, @yearly or @every <duration>`,
      };
  } else if (text.split(/\s+/).length !== 5) {
    return {
      error: `"${text}" has ${text.split(/\s+/).length} fields; a cron expression has exactly 5 (minute hour day-of-month month day-of-week), in UTC`,
    };
  }
  let cron: Cron;
  try {
    cron = new Cron(text, { timezone: 'UTC', mode: '5-part' });
  } catch (err) {
    return { error: `"${text}" is not a valid cron expression: ${reason(err)}` };
  }
  // A pattern that can never match (e.g. 31 February) would simply never fire: refuse it instead.
  if (!cron.nextRun(new Date(0))) return { error: `"${text}" never fires (no date matches it)` };
  return { schedule: { next: (after) => cron.nextRun(after) } };
}

/**
 * `@every 15m`: every 15 minutes counted from the Unix epoch, so the firing times are fixed in UTC (on
 * the quarter hour here), the same on every replica and across restarts, whenever the schedule was made.
 */
function parseEvery(text: string): CronParse {
  const m = EVERY.exec(text);
  const minutes =
    m && (m[1] !== undefined || m[2] !== undefined) ? Number(m[1] ?? 0) * 60 + Number(m[2] ?? 0) : NaN;
  if (!Number.isSafeInteger(minutes))
    return {
      error: `"${text}" is not a valid @every: give hours and/or minutes, e.g. @every 15m, @every 1h, @every 1h30m`,
    };
  if (minutes < 1 || minutes > MAX_EVERY_MINUTES)
    return { error: `"${text}": an @every interval is between 1m and ${MAX_EVERY_MINUTES / 60}h` };
  const step = minutes * MINUTE_MS;
  return { schedule: { next: (after) => new Date((Math.floor(after.getTime() / step) + 1) * step) } };
}

/** croner's message without its class prefix ("CronPattern: Invalid value for minute: 61"). */
function reason(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).replace(/^CronPattern:\s*/, '');
}
