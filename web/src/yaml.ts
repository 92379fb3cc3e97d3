/**
 * Data written as the YAML of factory files (block maps, flow lists of values), to show or prefill
 * what a person commits or edits. The service reads it back: the dashboard writes YAML but never
 * parses it (Test filter sends its text to the API, which reads it as it reads automation files).
 */
export function yamlText(value: unknown): string {
  return `${lines(value, 0).join('\n')}\n`;
}

function lines(value: unknown, indent: number): string[] {
  const pad = ' '.repeat(indent);
  if (Array.isArray(value)) {
    if (value.every(isScalar)) return [`${pad}${flow(value)}`];
    return value.flatMap((item) => {
      const [first, ...rest] = lines(item, indent + 2);
      return [`${pad}- ${first.trimStart()}`, ...rest];
    });
  }
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>);
    if (entries.length === 0) return [`${pad}{}`];
    return entries.flatMap(([key, v]) =>
      isScalar(v) || (Array.isArray(v) && v.every(isScalar)) || isEmptyMap(v)
        ? [`${pad}${scalar(key)}: ${Array.isArray(v) ? flow(v) : isEmptyMap(v) ? '{}' : scalar(v)}`]
        : [`${pad}${scalar(key)}:`, ...lines(v, indent + 2)],
    );
  }
  return [`${pad}${scalar(value)}`];
}

const isScalar = (v: unknown): boolean => v === null || typeof v !== 'object';
const isEmptyMap = (v: unknown): boolean =>
  !!v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0;
const flow = (values: unknown[]): string => `[${values.map(scalar).join(', ')}]`;

/** Words YAML would read as something other than a string (a boolean, null, a number). */
const NOT_STRINGS = /^(?:true|false|yes|no|on|off|y|n|null|~|[-+.]?\d.*|\.inf|\.nan)$/i;

/** Plain when it cannot be misread, else JSON's quoting (a JSON string is a YAML string). */
function scalar(v: unknown): string {
  if (typeof v !== 'string') return JSON.stringify(v) ?? 'null';
  return /^[A-Za-z_/][\w./-]*$/.test(v) && !NOT_STRINGS.test(v) ? v : JSON.stringify(v);
}
