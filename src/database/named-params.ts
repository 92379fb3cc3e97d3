/**
 * Named parameters for a statement written once (a constant, so pg prepares one text): each name's
 * placeholder (`$1`, `$2`, … in the order given) to write into the text, and `values` to lay out what
 * is passed in that same order — the text says `${p.$.now}`, never a number to keep in step by hand.
 */
export interface NamedParams<N extends string> {
  /** The placeholder of each name. */
  readonly $: Readonly<Record<N, string>>;
  /** The statement's values, every name given, in placeholder order. */
  values(given: Readonly<Record<N, unknown>>): unknown[];
}

export function namedParams<const N extends string>(names: readonly N[]): NamedParams<N> {
  return {
    $: Object.fromEntries(names.map((name, i) => [name, `$${i + 1}`])) as Record<N, string>,
    values: (given) => names.map((name) => given[name]),
  };
}
