/**
 * Run times: written for the wire as ISO 8601 durations (`PT1M5.25S`, what the run API's `run_time`
 * is), and read back for people (`1 min 5 s`). Import-free, so the dashboard's build shares this file
 * with the CLI (bin/build-if-stale.js rebuilds the dashboard when it changes).
 */

/** ISO 8601 duration, e.g. PT1M5.250S. */
export function isoDuration(ms: number): string {
  const total = Math.max(0, ms) / 1000;
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const seconds = Number((total % 60).toFixed(3));
  return `PT${hours ? `${hours}H` : ''}${minutes ? `${minutes}M` : ''}${seconds || (!hours && !minutes) ? `${seconds}S` : ''}`;
}

/** `PT57.638S` as `57.6 s`, `PT1H2M3S` as `1 h 2 min`; a value that is no such duration, as it is. */
export function humanDuration(iso: string): string {
  const m = /^P(?:(\d+)D)?T?(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?$/.exec(iso);
  if (!m || iso === 'P' || iso === 'PT') return iso;
  const [days, hours, minutes] = [m[1], m[2], m[3]].map((v) => Number(v ?? 0));
  const seconds = Number(m[4] ?? 0);
  const total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds;
  // Rounded before the unit is chosen: 59.6 s shows as 1 min, never as "60 s".
  const shown = total < 10 ? Math.round(total * 10) / 10 : Math.round(total);
  if (shown < 60) return `${shown} s`;
  const s = Math.round(total);
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ''}`;
  if (s < 86400)
    return `${Math.floor(s / 3600)} h${Math.floor((s % 3600) / 60) ? ` ${Math.floor((s % 3600) / 60)} min` : ''}`;
  return `${Math.floor(s / 86400)} d${Math.floor((s % 86400) / 3600) ? ` ${Math.floor((s % 86400) / 3600)} h` : ''}`;
}
