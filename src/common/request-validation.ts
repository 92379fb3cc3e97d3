import { Inject, Injectable } from '@nestjs/common';
import { RequestInvalid } from './problem.js';
import { SchemaRegistry } from './schema-validator.js';

export { RequestInvalid };

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
