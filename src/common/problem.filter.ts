import { type ArgumentsHost, Catch, type ExceptionFilter, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { problemResponse } from './problem.js';

/** Nest's side of the one error mapping (`problemResponse`): every API error leaves as problem+json. */
@Catch()
export class ProblemFilter implements ExceptionFilter {
  private readonly log = new Logger('ProblemFilter');

  catch(exception: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    const req = ctx.getRequest<FastifyRequest>();
    const reply = ctx.getResponse<FastifyReply>();
    const problem = problemResponse(exception, {
      method: req.method,
      path: req.url.split('?')[0],
      traceId: String(req.id),
      bodyLimit: req.routeOptions.bodyLimit,
    });
    if (problem.log) this.log[problem.log.level]({ err: exception, reqId: req.id }, problem.log.message);
    void reply.status(problem.status).headers(problem.headers).send(problem.body);
  }
}
