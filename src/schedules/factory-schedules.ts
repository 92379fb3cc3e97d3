import { isDeepStrictEqual } from 'node:util';
import { Inject, Injectable } from '@nestjs/common';
import { TriggerIndex, type AutomationWithConfig } from '../automations/trigger-index.js';
import { Clock } from '../common/clock.js';
import { newUuid } from '../common/ids.js';
import { parseCron } from '../definitions/cron.js';
import { DefinitionStore } from '../reconciler/definition-store.js';
import { McpCredentials } from '../secrets/mcp-credentials.js';
import { sealIdOf, type ScheduleFields } from './schedule.js';
import { SchedulesRepository } from './schedules.repository.js';

/** An automation's `provider: schedule` triggers, by their index among its triggers. */
function scheduleTriggers(triggers: unknown): Array<{ index: number; cron: string }> {
  const out: Array<{ index: number; cron: string }> = [];
  (Array.isArray(triggers) ? triggers : []).forEach((t: unknown, index) => {
    const spec = t as { provider?: unknown; filter?: { cron_schedule?: unknown } } | null;
    if (spec?.provider === 'schedule' && typeof spec.filter?.cron_schedule === 'string')
      out.push({ index, cron: spec.filter.cron_schedule });
  });
  return out;
}

/**
 * Keeps a factory's schedules in step with the `provider: schedule` triggers of its applied
 * automations, after every apply (announced on every replica) and at start: one schedule per trigger,
 * keyed by (automation, trigger index), its prompt and config those of the automation's runs. The
 * factory owns them: the API shows them and refuses to change them. A changed cron, or a schedule
 * enabled again, counts its next time from now; anything else keeps it.
 */
@Injectable()
export class FactorySchedules {
  constructor(
    @Inject(SchedulesRepository) private readonly schedules: SchedulesRepository,
    @Inject(TriggerIndex) private readonly automations: TriggerIndex,
    @Inject(DefinitionStore) private readonly store: DefinitionStore,
    @Inject(McpCredentials) private readonly credentials: McpCredentials,
    @Inject(Clock) private readonly clock: Clock,
  ) {}

  /** Every factory's schedules (at start, and when the announcements may have been missed). */
  async syncAll(): Promise<void> {
    const ids = new Set([
      ...(await this.store.listAll()).map((f) => f.id),
      ...(await this.schedules.factoriesWithSchedules()),
    ]);
    for (const id of ids) await this.sync(id);
  }

  async sync(factoryId: string): Promise<void> {
    await this.schedules.db.transaction(async (tx) => {
      // Removed: its schedules went with it (ON DELETE CASCADE).
      if (!(await this.store.find(factoryId, tx))) return;
      // The factory's apply lock: an apply in progress commits first, and replicas sync one at a time.
      const factory = await this.store.lock(tx, factoryId);
      const now = this.clock.now();
      const existing = new Map(
        (await this.schedules.ofFactory(tx, factoryId)).map((s) => [
          `${s.automationId}#${s.triggerIndex}`,
          s,
        ]),
      );
      for (const a of await this.automations.automations(factoryId, tx)) {
        for (const trigger of scheduleTriggers(a.triggers)) {
          const parsed = parseCron(trigger.cron);
          // Validation refuses a bad cron before it applies; a row from before that rule is left out.
          if ('error' in parsed) continue;
          const key = `${a.automationId}#${trigger.index}`;
          const fields = fieldsOf(a, trigger.cron);
          const current = existing.get(key);
          existing.delete(key);
          if (!current) {
            const id = newUuid();
            await this.schedules.insert(
              tx,
              {
                id,
                teamId: factory.teamId,
                fields: { ...fields, agentConfig: this.credentials.seal(fields.agentConfig, sealIdOf(id)) },
                nextFireAt: fields.enabled ? parsed.schedule.next(now) : null,
                creatorId: null,
                owner: { factoryId, automationId: a.automationId, triggerIndex: trigger.index },
              },
              now,
            );
            continue;
          }
          const stored = {
            ...current.fields,
            agentConfig: this.credentials.open(current.fields.agentConfig, sealIdOf(current.id)),
          };
          if (isDeepStrictEqual(stored, fields)) continue;
          const recount = fields.cronSchedule !== stored.cronSchedule || (fields.enabled && !stored.enabled);
          const next = !fields.enabled ? null : recount ? parsed.schedule.next(now) : current.nextFireAt;
          await this.schedules.update(
            tx,
            current.id,
            { ...fields, agentConfig: this.credentials.seal(fields.agentConfig, sealIdOf(current.id)) },
            next,
            null,
            now,
          );
        }
      }
      // Triggers (or automations) that are gone.
      await this.schedules.delete(
        tx,
        [...existing.values()].map((s) => s.id),
      );
    });
  }
}

function fieldsOf(a: AutomationWithConfig, cron: string): ScheduleFields {
  return {
    name: a.name,
    cronSchedule: cron,
    prompt: a.prompt,
    agentConfig: { ...a.config },
    metadata: null,
    mode: null,
    agentUid: null,
    enabled: a.enabled,
  };
}
