import type { FastifyRequest } from 'fastify';
import { invalidParam } from './problem.js';

/**
 * A request's query string, read the same way by every controller: repeatable keys kept in order,
 * a parameter that may appear once refused (400 naming it) when it appears twice. Controllers turn it
 * into typed option objects; services never see it.
 */
export class QueryParams {
  private constructor(private readonly search: URLSearchParams) {}

  static of(req: FastifyRequest): QueryParams {
    const i = req.url.indexOf('?');
    return new QueryParams(new URLSearchParams(i < 0 ? '' : req.url.slice(i + 1)));
  }

  static parse(queryString: string): QueryParams {
    return new QueryParams(new URLSearchParams(queryString));
  }

  /** The parameter's one value; undefined when absent. */
  one(name: string): string | undefined {
    const all = this.search.getAll(name);
    if (all.length > 1) throw invalidParam(name, `${name} may be given once`);
    return all[0];
  }

  /**
   * Every value of a repeatable parameter, in order: repeated (`a=1&a=2`, as the Oz clients send an
   * array) or comma-separated (`a=1,2`); empty values dropped.
   */
  all(name: string): string[] {
    return this.search
      .getAll(name)
      .flatMap((v) => v.split(','))
      .filter((v) => v !== '');
  }

  /** Whether the parameter is given at all (even empty). */
  has(name: string): boolean {
    return this.search.has(name);
  }

  /** Every (name, value) pair, in order. */
  entries(): IterableIterator<[string, string]> {
    return this.search.entries();
  }
}
