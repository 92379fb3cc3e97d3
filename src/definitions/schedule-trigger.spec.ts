import { describe, expect, it } from 'vitest';
import { SchemaRegistry } from '../common/schema-validator.js';
import { formatError } from './definition.js';
import { loadDefinition } from './validate-definition.js';

const schemas = new SchemaRegistry();
const base: Record<string, string> = {
  'factory.yaml': 'schemaVersion: v1alpha1\nname: acme\n',
  'agents/lead/agent.md': '---\nagentType: FOREMAN\n---\nLead.\n',
};
const automation = (trigger: string) =>
  `---\ndescription: nightly\ntriggers:\n${trigger}---\nSummarise yesterday.\n`;
const schedule = (cron: string) =>
  `  - provider: schedule\n    event: cron_fired\n    filter:\n      cron_schedule: "${cron}"\n`;

function check(files: Record<string, string>) {
  const result = loadDefinition(new Map(Object.entries({ ...base, ...files })), schemas, {});
  return { ...result, lines: result.errors.map(formatError) };
}

describe('provider: schedule triggers in automation files', () => {
  it('accepts a cron, a nickname and an @every', () => {
    const r = check({
      'automations/nightly/automation.md': automation(schedule('0 2 * * *') + schedule('@every 15m')),
      'automations/weekly/automation.md': automation(schedule('@weekly')),
    });
    expect(r.lines).toEqual([]);
    expect(r.definition!.automations[0]!.triggers[0]).toEqual({
      provider: 'schedule',
      event: 'cron_fired',
      filter: { cron_schedule: '0 2 * * *' },
    });
  });

  it('refuses a bad cron at the line of its cron_schedule, with the reason', () => {
    const r = check({
      'automations/nightly/automation.md': automation(schedule('0 2 * * *') + schedule('61 2 * * *')),
    });
    expect(r.lines).toEqual([
      'automations/nightly/automation.md:11: cron_schedule: "61 2 * * *" is not a valid cron expression: Invalid value for minute: 61',
    ]);
  });

  it('refuses a schedule trigger without its cron, or with a webhook’s event', () => {
    const r = check({
      'automations/a/automation.md': automation(
        '  - provider: schedule\n    event: received\n    filter: {}\n',
      ),
    });
    expect(r.lines).toEqual([
      'automations/a/automation.md:5: triggers.0.event must be "cron_fired"',
      'automations/a/automation.md:6: triggers.0.filter.cron_schedule is required',
    ]);
  });
});
