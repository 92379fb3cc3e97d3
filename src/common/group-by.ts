/** `items` grouped by `key`, each group in the items' order (Map.groupBy needs Node 21). */
export function groupBy<T>(items: Iterable<T>, key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) addToGroup(groups, key(item), item);
  return groups;
}

/** Appends `item` to its group in `groups`, starting the group if it is the first. */
export function addToGroup<T>(groups: Map<string, T[]>, key: string, item: T): void {
  const group = groups.get(key);
  if (group) group.push(item);
  else groups.set(key, [item]);
}
