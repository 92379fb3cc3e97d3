import { fileURLToPath } from 'node:url';

/** The package root, the same from `src/common` (tests) and `dist/common` (built). */
export const PACKAGE_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export function fromRoot(...parts: string[]): string {
  return [PACKAGE_ROOT.replace(/\/$/, ''), ...parts].join('/');
}
