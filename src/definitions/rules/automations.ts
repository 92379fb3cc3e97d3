import type {
  AgentDefinition,
  AgentOverrides,
  AutomationDefinition,
  AutomationTrigger,
  ScheduleTrigger,
  WebhookDefinition,
  WebhookTrigger,
} from '../definition.js';
import { parseCron } from '../cron.js';
import type { DefinitionFile } from '../definition-file.js';
import { isCredentialHeader } from '../credential-headers.js';
import { checkFilterLimits } from '../filter-limits.js';
import { isValid, type Findings, type ValidationContext } from './rule.js';

/** What an automation's checks need from the other kinds of file. */
export interface AutomationScope {
  agents: AgentDefinition[];
  foreman?: AgentDefinition;
  webhooks: WebhookDefinition[];
  ctx: ValidationContext;
  findings: Findings;
}

/** One trigger of one automation file, at `triggers[index]`. */
interface TriggerAt<T> {
  trigger: T;
  index: number;
  file: DefinitionFile;
}

/** The checks of each trigger provider: a new provider adds its rule here. */
const TRIGGER_RULES: {
  [P in AutomationTrigger['provider']]: (
    at: TriggerAt<Extract<AutomationTrigger, { provider: P }>>,
    s: WebhookRefs,
  ) => void;
} = {
  webhook: checkWebhookTrigger,
  schedule: checkScheduleTrigger,
};

/**
 * automations/<name>/automation.md: an agent that exists (else the foreman runs it), and triggers
 * each provider's rule accepts. Files that failed their own checks are left out.
 */
export function checkAutomations(files: DefinitionFile[], scope: AutomationScope): AutomationDefinition[] {
  const { agents, foreman, findings } = scope;
  const agentNames = new Set(agents.map((a) => a.name));
  const refs = new WebhookRefs(scope);
  const automations: AutomationDefinition[] = [];
  for (const file of files.filter(isValid)) {
    const d = file.source.data as {
      enabled?: boolean;
      agent?: string;
      description?: string;
      triggers: AutomationTrigger[];
      overrides?: AgentOverrides;
    };
    if (d.agent !== undefined && !agentNames.has(d.agent)) {
      findings.error(
        file.source.path,
        file.source.lineOf(['agent']),
        `agent "${d.agent}" does not exist; agents: ${agents.map((a) => a.name).join(', ') || 'none'}`,
      );
    }
    d.triggers.forEach((trigger, index) =>
      (TRIGGER_RULES[trigger.provider] as (at: TriggerAt<AutomationTrigger>, s: WebhookRefs) => void)(
        { trigger, index, file },
        refs,
      ),
    );
    automations.push({
      name: file.name,
      path: file.source.path,
      enabled: d.enabled ?? true,
      agent: d.agent ?? foreman?.name ?? '',
      description: d.description,
      triggers: d.triggers,
      overrides: d.overrides ?? {},
      prompt: file.source.body.trim(),
    });
  }
  if (refs.uidsSkipped) findings.unchecked('webhook UIDs in triggers', scope.ctx);
  return automations;
}

/** How a trigger may name a webhook: by its UID; a file name is an error that says which UID to use. */
class WebhookRefs {
  readonly findings: Findings;
  private readonly known: ValidationContext['knownWebhooks'];
  private readonly liveUidByPath: Map<string, string>;
  private readonly knownUids: Set<string>;
  private readonly byRef = new Map<string, WebhookDefinition>();
  /** A UID was not checked: offline, the factory's webhooks are not known. */
  uidsSkipped = false;

  constructor({ webhooks, ctx, findings }: AutomationScope) {
    this.findings = findings;
    this.known = ctx.knownWebhooks;
    const all = ctx.knownWebhooks ?? [];
    this.liveUidByPath = new Map(all.filter((w) => !w.deleted).map((w) => [w.path, w.uid]));
    this.knownUids = new Set(all.map((w) => w.uid));
    for (const w of webhooks) for (const ref of [w.name, `${w.name}.yaml`, w.path]) this.byRef.set(ref, w);
  }

  /** The error for `id`, a webhook reference in a trigger, or none. */
  problem(id: string): string | undefined {
    const byName = this.byRef.get(id);
    if (byName) {
      const uid = this.liveUidByPath.get(byName.path);
      if (uid) return `"${id}" is a file name, not a UID: use the UID ${uid} of ${byName.path}`;
      return this.known
        ? `"${id}" is a file name, not a UID, and ${byName.path} has no UID until it first applies: commit the webhook first, then use the UID it gets (GET /api/v1/factory/{uid}/webhooks)`
        : `"${id}" is a file name, not a UID: use the UID of ${byName.path} (GET /api/v1/factory/{uid}/webhooks)`;
    }
    if (!this.known) {
      this.uidsSkipped = true;
      return undefined;
    }
    if (this.knownUids.has(id)) return undefined;
    const live = this.known.filter((w) => !w.deleted);
    return `UID "${id}" is not a webhook of this factory; ${
      live.length
        ? `its webhooks: ${live.map((w) => `${w.path} (${w.uid})`).join(', ')}`
        : 'it has no webhooks yet'
    }`;
  }
}

/**
 * `provider: webhook`: exactly one webhook, by a UID of this factory, a header filter without
 * credential headers, and a payload filter within limits.
 */
function checkWebhookTrigger({ trigger, index, file }: TriggerAt<WebhookTrigger>, refs: WebhookRefs): void {
  const { findings } = refs;
  const path = file.source.path;
  const at = ['triggers', index, 'filter', 'webhook_ids'];
  const ids = trigger.filter.webhook_ids;
  if (ids.length !== 1) {
    findings.error(
      path,
      file.source.lineOf(at),
      `a trigger selects exactly one webhook UID; this one lists ${ids.length === 0 ? 'none' : ids.length}`,
    );
  }
  ids.forEach((id, j) => {
    const problem = refs.problem(id);
    if (problem) findings.error(path, file.source.lineOf([...at, j]), problem);
  });
  for (const name of Object.keys(trigger.filter.headers ?? {}).filter(isCredentialHeader))
    findings.error(
      path,
      file.source.lineOf(['triggers', index, 'filter', 'headers', name]),
      `header "${name}" may carry a credential, and credentials are never matchable (nor stored): filter on another header or on the payload`,
    );
  if (trigger.filter.payload === undefined) return;
  for (const problem of checkFilterLimits(trigger.filter.payload))
    findings.error(path, file.source.lineOf(['triggers', index, 'filter', 'payload']), problem);
}

/** `provider: schedule`: a cron the scheduler can read (docs/schedules.md), else an error at its line. */
function checkScheduleTrigger({ trigger, index, file }: TriggerAt<ScheduleTrigger>, refs: WebhookRefs): void {
  const parsed = parseCron(trigger.filter.cron_schedule);
  if ('error' in parsed)
    refs.findings.error(
      file.source.path,
      file.source.lineOf(['triggers', index, 'filter', 'cron_schedule']),
      `cron_schedule: ${parsed.error}`,
    );
}
