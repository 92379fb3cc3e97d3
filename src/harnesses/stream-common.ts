/**
 * What the Codex and Gemini CLI translators share: provider failures as a person can act on them
 * (both CLIs report a failure as text), tool output cut for the conversation, skill reads. Pure.
 */

/** The model provider behind a harness, as a person fixing a failed run needs to know it. */
export interface Provider {
  name: string;
  /** The variable that carries its key. */
  keyVariable: string;
  /** The variable that carries its base URL (a gateway, a compatible provider). */
  baseUrlVariable: string;
}

export const OPENAI: Provider = {
  name: 'OpenAI',
  keyVariable: 'OPENAI_API_KEY',
  baseUrlVariable: 'OPENAI_BASE_URL',
};
export const GEMINI: Provider = {
  name: 'Gemini',
  keyVariable: 'GEMINI_API_KEY',
  baseUrlVariable: 'GOOGLE_GEMINI_BASE_URL',
};

/** A refused key: retrying cannot mend it, so a turn that meets one is stopped at once. */
export const REFUSED_KEY =
  /\b40[13]\b|unauthori[sz]ed|unauthenticated|permission.denied|invalid[_ ]api[_ ]key|api key not valid|API_KEY_INVALID|incorrect api key/i;

/** Ways a model call fails that a person fixes differently, most specific first. */
const KINDS: Array<{ test: RegExp; say: (p: Provider, key: string) => string }> = [
  {
    test: REFUSED_KEY,
    say: (p, key) => `the model provider refused the API key: check ${key} holds a valid ${p.name} API key`,
  },
  {
    test: /\b429\b|rate.?limit|quota|resource.?exhausted|too many requests/i,
    say: () =>
      "the model provider is rate-limiting this key or its quota is spent (HTTP 429): send a follow-up to retry later, or raise the key's limits",
  },
  {
    test: /\b5\d\d\b|overloaded|unavailable|internal error|server.?error/i,
    say: () => 'the model provider failed or is overloaded (HTTP 5xx): send a follow-up to retry later',
  },
  {
    test: /disconnected|terminated|stream closed|error decoding response body|ECONNRESET|ECONNREFUSED|socket hang up|fetch failed|network/i,
    say: (p) =>
      `the connection to the model provider failed or was cut (check ${p.baseUrlVariable} and the network)`,
  },
];

/**
 * What to fix for a turn the CLI ended with `cliMessage`, then the CLI's own words (which name the
 * status and the provider's message). `secretName`: the team secret the key came from.
 */
export function explainProviderFailure(
  provider: Provider,
  cliTitle: string,
  cliMessage: string,
  secretName?: string,
): string {
  const said = cliMessage.trim().slice(0, 300) || 'no message';
  const key = secretName ? `the team secret "${secretName}"` : provider.keyVariable;
  const kind = KINDS.find((k) => k.test.test(said));
  return kind
    ? `${kind.say(provider, key)} (${cliTitle}: ${said})`
    : `${cliTitle} ended the turn with an error: ${said}`;
}

/** A tool's output in the conversation is cut to this many characters (the transcript has it all). */
const MAX_RESULT_CHARS = 4000;

export function clipped(text: string): string {
  return text.length > MAX_RESULT_CHARS ? `${text.slice(0, MAX_RESULT_CHARS)}…` : text;
}

/** The path of a SKILL.md a shell command or file tool reads, if it reads one. */
export function skillPathIn(text: string): string | undefined {
  return /([^\s'"`<>|;&]*SKILL\.md)\b/.exec(text)?.[1];
}
