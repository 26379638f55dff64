// The inspector's own metrics, on the registry every deepq process serves (/metrics on
// METRICS_PORT). Labels are route patterns, never paths: no goal id or artifact name.
import { Counter, Gauge, Histogram } from 'prom-client';
import type { GoalClient } from '../../cli/goal-client.ts';
import { Metrics } from '../../shared/runtime/metrics.ts';
import { pingRedis } from '../../shared/runtime/redis.ts';

export class UiMetrics {
  readonly base = new Metrics({ service: 'ui' });
  readonly requests = new Counter({
    name: 'deepq_ui_requests_total',
    help: 'Inspector HTTP requests, by route pattern, method and status',
    labelNames: ['route', 'method', 'status'],
    registers: [this.base.registry],
  });
  readonly requestDuration = new Histogram({
    name: 'deepq_ui_request_duration_seconds',
    help: 'Time to the response headers (an SSE stream counts until it opens)',
    labelNames: ['route', 'method'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.base.registry],
  });
  readonly liveStreams = new Gauge({
    name: 'deepq_ui_live_streams',
    help: 'Open Server-Sent-Events streams (goal pages following a goal)',
    registers: [this.base.registry],
  });
  readonly streamReaders = new Gauge({
    name: 'deepq_ui_stream_readers',
    help: 'Blocking Redis readers open: one per goal timeline being followed in this process',
    registers: [this.base.registry],
  });
  readonly actions = new Counter({
    name: 'deepq_ui_actions_total',
    help: 'Actions taken from the inspector (enqueue, cancel, resume, end, approve, reject), by outcome',
    labelNames: ['action', 'outcome'],
    registers: [this.base.registry],
  });

  get registry() {
    return this.base.registry;
  }
}

/**
 * What every deepq process reports at a scrape: Redis reachable (left at 0, it fired the critical
 * alert), and the tool calls waiting for a human, read from the same Redis set as the services.
 */
export async function refreshUiGauges(base: Metrics, client: GoalClient): Promise<void> {
  const up = await pingRedis(client.redis);
  base.redisUp.set(up ? 1 : 0);
  if (up) base.approvalsPending.set(await client.approvals.pendingCount());
}
