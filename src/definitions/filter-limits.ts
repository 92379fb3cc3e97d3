/** Limits on a trigger's payload filter, checked when the definition applies. */
export const FILTER_LIMITS = { depth: 8, keys: 64, valuesPerList: 100, bytes: 8 * 1024 } as const;

const OPERATORS = new Set(['in', 'not_in', 'exists']);

/** What is over the limits in `payload` (empty when within them). */
export function checkFilterLimits(payload: Record<string, unknown>): string[] {
  const problems: string[] = [];
  let keys = 0;
  let depth = 0;
  let longestList = 0;
  const walk = (fields: Record<string, unknown>, level: number) => {
    depth = Math.max(depth, level);
    for (const condition of Object.values(fields)) {
      keys += 1;
      if (Array.isArray(condition)) longestList = Math.max(longestList, condition.length);
      else if (condition && typeof condition === 'object') {
        const entries = Object.entries(condition);
        const operator = entries.length === 1 && OPERATORS.has(entries[0][0]);
        if (operator && Array.isArray(entries[0][1]))
          longestList = Math.max(longestList, entries[0][1].length);
        if (!operator) walk(condition as Record<string, unknown>, level + 1);
      }
    }
  };
  walk(payload, 1);
  const bytes = Buffer.byteLength(JSON.stringify(payload), 'utf8');
  if (depth > FILTER_LIMITS.depth)
    problems.push(`payload filter nests ${depth} levels deep; the limit is ${FILTER_LIMITS.depth}`);
  if (keys > FILTER_LIMITS.keys)
    problems.push(`payload filter has ${keys} keys; the limit is ${FILTER_LIMITS.keys}`);
  if (longestList > FILTER_LIMITS.valuesPerList)
    problems.push(
      `payload filter has a list of ${longestList} values; the limit is ${FILTER_LIMITS.valuesPerList} per list`,
    );
  if (bytes > FILTER_LIMITS.bytes)
    problems.push(`payload filter is ${bytes} bytes as JSON; the limit is ${FILTER_LIMITS.bytes} (8 KB)`);
  return problems;
}
