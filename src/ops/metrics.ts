import { Injectable } from '@nestjs/common';
import { collectDefaultMetrics, Histogram, Registry } from 'prom-client';

/** The Prometheus registry at /metrics; modules add their own metrics to `registry`. */
@Injectable()
export class Metrics {
  readonly registry = new Registry();
  readonly httpDuration = new Histogram({
    name: 'factoryd_http_request_duration_seconds',
    help: 'HTTP requests by route and status',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'factoryd_' });
  }
}
