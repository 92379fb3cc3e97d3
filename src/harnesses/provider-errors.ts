/** The model provider behind a harness, as a person fixing a failed run needs to know it. */
export interface Provider {
  name: string;
  /** The variable that carries its key (the team secret named by the run's harness auth). */
  keyVariable: string;
}

export const OPENAI: Provider = { name: 'OpenAI', keyVariable: 'OPENAI_API_KEY' };
export const GEMINI: Provider = { name: 'Gemini', keyVariable: 'GEMINI_API_KEY' };

/** Ways a model call fails that a person fixes differently, most specific first. */
const KINDS: Array<{ test: RegExp; say: (p: Provider) => string }> = [
  {
    test: /\b401\b|unauthori[sz]ed|unauthenticated|invalid[_ ]api[_ ]key|api key not valid|API_KEY_INVALID|incorrect api key/i,
    say: (p) =>
      `${p.name} rejected the API key: check the team secret that provides ${p.keyVariable} (the run's harness auth secret) and store a valid key.`,
  },
  {
    test: /\b429\b|rate.?limit|quota|resource.?exhausted|too many requests/i,
    say: (p) =>
      `${p.name} refused the request for rate limit or quota: wait and send a follow-up, or raise the key's limits with ${p.name}.`,
  },
  {
    test: /\b5\d\d\b|overloaded|unavailable|internal error|server.?error/i,
    say: (p) => `${p.name} failed to answer (a server error or overload): retry the run later.`,
  },
  {
    test: /disconnected|terminated|stream closed|error decoding response body|ECONNRESET|ECONNREFUSED|socket hang up|fetch failed|network/i,
    say: (p) =>
      `The connection to ${p.name} dropped before its answer was complete: check the provider's base URL and network, then send a follow-up or retry.`,
  },
];

/**
 * A status message a person can act on for a turn the CLI ended with `cliMessage`: what to fix, then
 * the CLI's own words (which name the status and the provider's message).
 */
export function explainProviderFailure(provider: Provider, cliMessage: string): string {
  const said = cliMessage.trim() || 'no message';
  const kind = KINDS.find((k) => k.test.test(said));
  return kind ? `${kind.say(provider)} (${said})` : said;
}
