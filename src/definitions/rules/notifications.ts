import { endpointUrlProblem } from '../../common/outbound-url.js';
import type { NotificationDefinition } from '../definition.js';
import type { DefinitionFile } from '../definition-file.js';
import { dataOf, isValid, type Findings, type ValidationContext } from './rule.js';
import { setSecretCommand } from '../../secrets/secret-commands.js';

/** At most this many notification files per factory. */
const MAX_NOTIFICATIONS = 20;

/**
 * notifications/<name>.yaml: at most MAX_NOTIFICATIONS, a URL factoryd may POST to, and (with the
 * service) a team secret that exists and holds a `whsec_` value.
 */
export function checkNotifications(
  files: DefinitionFile[],
  findings: Findings,
  ctx: ValidationContext,
): NotificationDefinition[] {
  const out = files.map((f, i) => {
    const d = dataOf<NotificationDefinition & { events?: string[] }>(f);
    const n: NotificationDefinition = {
      name: f.name,
      path: f.source.path,
      url: d.url ?? '',
      events: d.events ?? [],
      secretName: d.secretName ?? '',
      enabled: d.enabled ?? true,
      description: d.description,
    };
    if (i === MAX_NOTIFICATIONS)
      findings.error(
        n.path,
        1,
        `a factory has at most ${MAX_NOTIFICATIONS} notification files and this one has ${files.length}`,
      );
    if (!isValid(f)) return n;
    // Offline, private destinations are the service's call (NOTIFICATIONS_ALLOW_PRIVATE_URLS): only the form is checked.
    const problem = endpointUrlProblem(n.url, ctx.allowPrivateUrls ?? true);
    if (problem) findings.error(n.path, f.source.lineOf(['url']), problem);
    if (ctx.secrets) {
      const secret = ctx.secrets.get(n.secretName);
      const line = f.source.lineOf(['secretName']);
      if (!secret)
        findings.error(
          n.path,
          line,
          `secret "${n.secretName}" does not exist${ctx.team ? ` in team ${ctx.team}` : ''}: create it with ${setSecretCommand(n.secretName, { team: ctx.team, generate: 'whsec' })}`,
        );
      else if (secret.whsec === false)
        findings.error(
          n.path,
          line,
          `secret "${n.secretName}" is not a Standard Webhooks secret (whsec_…): set one with ${setSecretCommand(n.secretName, { team: ctx.team, generate: 'whsec' })}`,
        );
    }
    return n;
  });
  if (!ctx.secrets && files.length) findings.unchecked('notification secrets (secretName)', ctx);
  return out;
}
