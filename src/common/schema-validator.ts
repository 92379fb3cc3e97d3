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
    let validate = this.compiled.get(id);
    if (!validate) {
      validate = this.ajv.getSchema(id);
      if (!validate) throw new Error(`no schema with $id ${id}`);
      this.compiled.set(id, validate);
    }
    if (validate(data)) return [];
    return describeErrors(validate.errors ?? []);
  }
}

/** Turn ajv's errors into one line each that a person can act on, most specific first. */
export function describeErrors(errors: ErrorObject[]): SchemaViolation[] {
  const out: SchemaViolation[] = [];
  const seen = new Set<string>();
  // A failed `oneOf` also reports why each branch failed ("url is not a known field" from the
  // `command` branch...): noise. The oneOf's own line, with the schema's description, says it better.
  const oneOfs = errors.filter((e) => e.keyword === 'oneOf').map((e) => `${e.schemaPath}/`);
  for (const e of errors) {
    if (e.keyword === 'if') continue;
    if (oneOfs.some((prefix) => e.schemaPath.startsWith(prefix))) continue;
    const path = pointerToPath(e.instancePath);
    const message = messageFor(e, path);
    const key = `${path}|${message}`;
    if (!seen.has(key)) {
      seen.add(key);
      out.push({ path, message });
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

function messageFor(e: ErrorObject, path: string): string {
  const field = (name: string) => (path ? `${path}.${name}` : name);
  const at = path || 'body';
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      return `${field(String(p.missingProperty))} is required`;
    case 'additionalProperties':
      return `${field(String(p.additionalProperty))} is not a known field`;
    case 'type':
      return `${at} must be ${String(p.type).replace(',', ' or ')}`;
    case 'enum':
      return `${at} must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'const':
      return `${at} must be ${JSON.stringify(p.allowedValue)}`;
    case 'pattern':
      // A regular expression alone is hard to act on: the schema's description says it in words.
      return `${at} must match ${String(p.pattern)}${e.parentSchema?.description ? ` (${String(e.parentSchema.description)})` : ''}`;
    case 'maxProperties':
      return `${at} must have at most ${String(p.limit)} keys`;
    case 'minProperties':
      return `${at} must have at least ${String(p.limit)} keys`;
    case 'oneOf':
      return `${at} must match exactly one allowed shape${e.parentSchema?.description ? ` (${String(e.parentSchema.description)})` : ''}`;
    case 'propertyNames':
      return `${at} has an invalid key ${JSON.stringify(p.propertyName)}`;
    case 'format':
      return `${at} must be a valid ${String(p.format)}`;
    default:
      return `${at} ${e.message ?? 'is invalid'}`;
  }
}
