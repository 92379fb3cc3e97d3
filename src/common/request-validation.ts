import { Inject, Injectable } from '@nestjs/common';
import { ApiError } from './problem.js';
import { SchemaRegistry, type SchemaViolation } from './schema-validator.js';

/** 400 with every violation: `detail` joins them, `invalid_params` lists them for programs. */
export class RequestInvalid extends ApiError {
  constructor(readonly violations: SchemaViolation[]) {
    super(400, 'invalid_request', 'Invalid request', violations.map((v) => v.message).join('; '));
  }
}

@Injectable()
export class RequestValidator {
  constructor(@Inject(SchemaRegistry) private readonly schemas: SchemaRegistry) {}

  /** Checks `body` against the schema `$id` and returns it typed, or throws RequestInvalid. */
  body<T>(schemaId: string, body: unknown): T {
    if (body === undefined || body === null) {
      throw new RequestInvalid([{ path: '', message: 'the request needs a JSON object body' }]);
    }
    const violations = this.schemas.check(schemaId, body);
    if (violations.length) throw new RequestInvalid(violations);
    return body as T;
  }
}
