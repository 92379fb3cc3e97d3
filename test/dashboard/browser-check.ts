import { existsSync } from 'node:fs';
import { fromRoot } from '../../src/common/paths.js';

/** Debian's chromium (`.ci/run` installs it when root); CHROMIUM_PATH overrides. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Why the browser tests cannot run here, or undefined when they can (no browser library loaded). */
export function browserMissing(): string | undefined {
  if (!existsSync(CHROMIUM))
    return `no browser at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`;
  if (!existsSync(fromRoot('dist', 'web', 'index.html'))) return 'the dashboard is not built (npm run build)';
  return undefined;
}
