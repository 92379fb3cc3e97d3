import { parseCron } from './cron.js';
import type { DefinitionError, ScheduleTrigger } from './definition.js';
import type { DefinitionFile } from './definition-file.js';

/** A `provider: schedule` trigger's error, at the line of its cron: an expression the scheduler cannot read. */
export function scheduleTriggerErrors(
  file: DefinitionFile,
  trigger: ScheduleTrigger,
  index: number,
): DefinitionError[] {
  const parsed = parseCron(trigger.filter.cron_schedule);
  if (!('error' in parsed)) return [];
  const line = file.source.lineOf(['triggers', index, 'filter', 'cron_schedule']);
  return [{ path: file.source.path, line, message: `cron_schedule: ${parsed.error}` }];
}
