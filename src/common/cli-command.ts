/**
 * A factoryd command as a person types it at a shell in the checkout: through `npx`, because `npm ci`
 * puts factoryd in node_modules/.bin, not on PATH, so a bare `factoryd …` fails when pasted. Every
 * piece of advice that names a command is written with this, never with the prefix spelled out.
 * Import-free, like the rest of what messages share.
 */
export function cliCommand(args: string): string {
  return `npx factoryd ${args}`;
}
