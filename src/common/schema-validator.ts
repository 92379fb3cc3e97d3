import { readdirSync, readFileSync } from 'node:fs';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { fromRoot } from './paths.js';

// ajv-formats ships CommonJS with a default export property.
type AddFormats = (ajv: Ajv2020) => unknown;
const addFormats = ((addFormatsModule as unknown as { default?: AddFormats }).default ??
  addFormatsModule) as unknown as AddFormats;

export interface SchemaViolation {
  /** Dotted path to the offending value, e.g. `config.mcp_servers.github`; empty for the root. */
  path: string;
  message: string;
}

/** A violation and the key it is about: an unknown or a forbidden key, else the value at `path`. */
export interface PlacedViolation extends SchemaViolation {
  key: string;
}

/**
 * Every JSON Schema under `schemas/` (by `$id`), compiled once. The same documents validate request
 * bodies and definition files and are published in the OpenAPI document.
 */
export class SchemaRegistry {
  private readonly ajv = new Ajv2020({
    allErrors: true,
    strict: false,
    allowUnionTypes: true,
    verbose: true,
  });
  private readonly compiled = new Map<string, ValidateFunction>();
  readonly schemas: Record<string, Record<string, unknown>> = {};

  constructor(dirs: string[] = [fromRoot('schemas', 'api'), fromRoot('schemas')]) {
    addFormats(this.ajv);
    for (const dir of dirs) {
      for (const file of readdirSync(dir).filter((f) => f.endsWith('.schema.json'))) {
        const schema = JSON.parse(readFileSync(`${dir}/${file}`, 'utf8')) as Record<string, unknown>;
        this.ajv.addSchema(schema);
        this.schemas[schema.$id as string] = schema;
      }
    }
  }

  /** All violations of `data` against the schema `$id` (empty when valid). */
  check(id: string, data: unknown): SchemaViolation[] {
    return this.place(id, data, 'the request').map(({ path, message }) => ({ path, message }));
  }

  /**
   * The violations with the key each is about, for a file whose lines are known. `subject` names the
   * whole (`this webhook`) in messages that compare it with a condition.
   */
  place(id: string, data: unknown, subject: string): PlacedViolation[] {
    let validate = this.compiled.get(id);
    if (!validate) {
      validate = this.ajv.getSchema(id);
      if (!validate) throw new Error(`no schema with $id ${id}`);
      this.compiled.set(id, validate);
    }
    if (validate(data)) return [];
    return describeErrors(validate.errors ?? [], subject);
  }
}

/**
 * Turn ajv's errors into one line each that a person can act on, most specific first: the key, what
 * is wrong with it, and the values allowed. `subject` names the whole checked (`this webhook`).
 */
function describeErrors(errors: ErrorObject[], subject = 'the request'): PlacedViolation[] {
  const out: PlacedViolation[] = [];
  const seen = new Set<string>();
  // A failed `oneOf` also reports why each branch failed ("url is not a known field" from the
  // `command` branch...): noise. The oneOf's own line, with the schema's description, says it better.
  const oneOfs = errors.filter((e) => e.keyword === 'oneOf').map((e) => `${e.schemaPath}/`);
  // An `if` error only says which branch failed; the branch's own error, told with the condition, says why.
  const ifs = errors.filter((e) => e.keyword === 'if');
  // The `if` a branch error belongs to: the same schema, at the branch's object (a list of objects
  // checks one schema at several places).
  const ifOf = (e: ErrorObject, schema: string) =>
    ifs
      .filter(
        (i) =>
          i.schemaPath === `${schema}/if` &&
          (e.instancePath === i.instancePath || e.instancePath.startsWith(`${i.instancePath}/`)),
      )
      .sort((a, b) => b.instancePath.length - a.instancePath.length)[0];
  for (const e of errors) {
    if (e.keyword === 'if') continue;
    if (oneOfs.some((prefix) => e.schemaPath.startsWith(prefix))) continue;
    const path = pointerToPath(e.instancePath);
    const branch = /^(.*)\/(then|else)\//.exec(e.schemaPath);
    const condition = branch && ifOf(e, branch[1]);
    const { message, key } =
      (condition && conditionalMessage(e, path, condition, subject)) ?? messageFor(e, path);
    const dedup = `${path}|${message}`;
    if (!seen.has(dedup)) {
      seen.add(dedup);
      out.push({ path, message, key: key ?? path });
    }
  }
  return out;
}

function pointerToPath(pointer: string): string {
  return pointer
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .join('.');
}

type Schema = Record<string, unknown>;
type Described = { message: string; key?: string };

const fieldOf = (path: string, name: string) => (path ? `${path}.${name}` : name);
const list = (values: unknown[]) =>
  values.map((v) => (typeof v === 'string' ? v : JSON.stringify(v))).join(', ');

/** The properties a schema declares, for naming the known keys and the allowed values of one. */
function propertiesOf(schema: unknown): Record<string, Schema> {
  return ((schema as Schema | undefined)?.properties ?? {}) as Record<string, Schema>;
}

/** What kind of JSON value `v` is, in words: `a string`, `a list`, `null`. */
function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a map';
  return `${typeof v === 'number' ? 'a number' : typeof v === 'boolean' ? 'a boolean' : 'a string'} (${JSON.stringify(v)})`;
}

/**
 * A `then`/`else` branch's error told with its `if`: the condition (`authMode: signature`), the value
 * the object has, and the two ways out. Undefined when the condition is not one of simple values.
 */
function conditionalMessage(
  e: ErrorObject,
  path: string,
  ifError: ErrorObject,
  subject: string,
): Described | undefined {
  const parent = ifError.parentSchema as Schema;
  const condition = Object.entries(propertiesOf(parent.if));
  if (!condition.length || !condition.every(([, s]) => 'const' in s)) return undefined;
  const wanted = condition.map(([k, s]) => `${k}: ${String(s.const)}`).join(' and ');
  const data = (ifError.data ?? {}) as Record<string, unknown>;
  const props = propertiesOf(parent);
  const has = condition
    .map(([k]) => {
      if (data[k] !== undefined) return `uses ${k}: ${String(data[k])}`;
      const fallback = props[k]?.default;
      return fallback === undefined ? `does not set ${k}` : `uses ${k}: ${String(fallback)}, the default`;
    })
    .join(' and ');
  const p = e.params as Record<string, unknown>;
  if (e.keyword === 'required') {
    const name = String(p.missingProperty);
    const allowed = props[name]?.enum as unknown[] | undefined;
    return {
      message: `${fieldOf(path, name)} is required with ${wanted}${allowed ? `: set it to one of ${list(allowed)}` : ''}`,
      // Reported where the condition is set: the missing key has no line of its own.
      key: fieldOf(path, condition[0][0]),
    };
  }
  const forbidden = ((e.schema as Schema | undefined)?.required ?? []) as string[];
  if (e.keyword === 'not' && forbidden.length === 1) {
    const name = forbidden[0];
    return {
      message: `${fieldOf(path, name)} is only for ${wanted} (${subject} ${has}); remove it or set ${wanted}`,
      key: fieldOf(path, name),
    };
  }
  return undefined;
}

function messageFor(e: ErrorObject, path: string): Described {
  const field = (name: string) => fieldOf(path, name);
  const at = path || 'body';
  const p = e.params as Record<string, unknown>;
  const described = e.parentSchema?.description ? ` (${String(e.parentSchema.description)})` : '';
  switch (e.keyword) {
    case 'required':
      return { message: `${field(String(p.missingProperty))} is required` };
    case 'additionalProperties': {
      const known = Object.keys(propertiesOf(e.parentSchema));
      const key = field(String(p.additionalProperty));
      return {
        message: `${key} is not a known field${known.length ? `; the known fields are ${known.join(', ')}` : ''}`,
        key,
      };
    }
    case 'type':
      return { message: `${at} must be ${String(p.type).replace(',', ' or ')}, not ${kindOf(e.data)}` };
    case 'enum':
      return {
        message: `${at} must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}, not ${JSON.stringify(e.data)}`,
      };
    case 'const':
      return { message: `${at} must be ${JSON.stringify(p.allowedValue)}` };
    case 'pattern':
      // A regular expression alone is hard to act on: the schema's description says it in words.
      return { message: `${at} must match ${String(p.pattern)}${described}, not ${JSON.stringify(e.data)}` };
    case 'maxProperties':
      return { message: `${at} must have at most ${String(p.limit)} keys` };
    case 'minProperties':
      return { message: `${at} must have at least ${String(p.limit)} keys` };
    case 'oneOf':
      return { message: `${at} must match exactly one allowed shape${described}` };
    case 'propertyNames':
      return { message: `${at} has an invalid key ${JSON.stringify(p.propertyName)}` };
    case 'format':
      return { message: `${at} must be a valid ${String(p.format)}` };
    case 'not': {
      const forbidden = ((e.schema as Schema | undefined)?.required ?? []) as string[];
      if (forbidden.length === 1)
        return { message: `${field(forbidden[0])} is not allowed here; remove it`, key: field(forbidden[0]) };
      return { message: `${at} is not allowed here${described}` };
    }
    default:
      return { message: `${at} ${e.message ?? 'is invalid'}` };
  }
}
