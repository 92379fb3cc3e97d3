import { Body, Inject, Injectable, mixin, type PipeTransform, type Type } from '@nestjs/common';
import { ApiBody } from '@nestjs/swagger';
import type { ApiSchemaName } from '../contract/generated.js';
import { schemaRef } from './openapi-decorators.js';
import { RequestValidator } from './request-validation.js';

/**
 * A route's JSON body by its schema's name ($id, schemas/api): the one place that validates it (400
 * naming each bad field), documents it (the OpenAPI requestBody) and — with the parameter typed as the
 * generated type of the same name — types it:
 *
 *   create(@SchemaBody('RunCreateRequest') body: RunCreateRequest)
 *
 * `optional`: a request without a body is `{}` (the routes whose every field is optional).
 */
export function SchemaBody(id: ApiSchemaName, opts: { optional?: boolean } = {}): ParameterDecorator {
  return (target, key, index) => {
    if (key === undefined) throw new Error(`@SchemaBody('${id}') is for a route method's parameter`);
    const method = Object.getOwnPropertyDescriptor(target, key)!;
    ApiBody({ required: !opts.optional, schema: schemaRef(id) })(target, key, method);
    Body(schemaPipe(id, opts.optional === true))(target, key, index);
  };
}

const pipes = new Map<string, Type<PipeTransform>>();

/** One pipe class per schema (Nest injects the validator into it). */
function schemaPipe(id: ApiSchemaName, optional: boolean): Type<PipeTransform> {
  const name = `${id}${optional ? '?' : ''}`;
  let pipe = pipes.get(name);
  if (!pipe) {
    @Injectable()
    class SchemaBodyPipe implements PipeTransform {
      constructor(@Inject(RequestValidator) private readonly validate: RequestValidator) {}
      transform(body: unknown): unknown {
        return this.validate.body(id, optional ? (body ?? {}) : body);
      }
    }
    pipe = mixin(SchemaBodyPipe);
    pipes.set(name, pipe);
  }
  return pipe;
}
