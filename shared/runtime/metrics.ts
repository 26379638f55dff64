// Prometheus metrics. Names start with deepq_, base units, counters end in _total, and no
// label ever carries a goal id.
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

export class Metrics {
  readonly registry = new Registry();
  readonly jobs = new Counter({
    name: 'deepq_jobs_total',
    help: 'Job runs, by queue, role and how each ended (failed: for good; retried: another attempt follows)',
    labelNames: ['queue', 'role', 'status'],
    registers: [this.registry],
  });
  readonly jobDuration = new Histogram({
    name: 'deepq_job_duration_seconds',
    help: 'Job processing time',
    labelNames: ['queue', 'role'],
    // Up to an hour: a subtask's run with tools, approvals and long model calls can take that long.
    buckets: [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600],
    registers: [this.registry],
  });
  readonly queueJobs = new Gauge({
    name: 'deepq_queue_jobs',
    help: 'Jobs in each queue by state',
    labelNames: ['queue', 'state'],
    registers: [this.registry],
  });
  readonly llmRequests = new Counter({
    name: 'deepq_llm_requests_total',
    help: 'Model requests (each HTTP attempt)',
    labelNames: ['provider', 'model', 'role', 'status'],
    registers: [this.registry],
  });
  readonly llmLatency = new Histogram({
    name: 'deepq_llm_latency_seconds',
    help: 'Model request latency (a streamed answer: until its end)',
    labelNames: ['provider', 'model', 'role'],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1200],
    registers: [this.registry],
  });
  readonly llmFirstOutput = new Histogram({
    name: 'deepq_llm_time_to_first_output_seconds',
    help: "Time from a streamed model request to its answer's first delta (thinking, text or a tool call)",
    labelNames: ['provider', 'model', 'role'],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120],
    registers: [this.registry],
  });
  readonly llmTokens = new Counter({
    name: 'deepq_llm_tokens_total',
    help: 'Model tokens by kind',
    labelNames: ['model', 'role', 'kind'],
    registers: [this.registry],
  });
  readonly toolCalls = new Counter({
    name: 'deepq_tool_calls_total',
    help:
      'Tool calls made by agents, by role, configured tool name ("unknown": a name no tool has; ' +
      '"mcp:<server>/*": an MCP tool with an odd name) and status',
    labelNames: ['role', 'tool', 'status'],
    registers: [this.registry],
  });
  readonly toolLatency = new Histogram({
    name: 'deepq_tool_latency_seconds',
    help: 'Time a tool call took to run (unknown tools are not timed)',
    labelNames: ['role', 'tool'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly goals = new Counter({
    name: 'deepq_goals_total',
    help: 'Goals reaching a status (terminal or awaiting_human)',
    labelNames: ['status'],
    registers: [this.registry],
  });
  readonly goalCycles = new Histogram({
    name: 'deepq_goal_cycles',
    help: 'Cycles a goal ran before it ended, by final status',
    labelNames: ['status'],
    buckets: [1, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50],
    registers: [this.registry],
  });
  readonly stalls = new Counter({
    name: 'deepq_stalls_total',
    help: 'Goals the stall detector stopped after K cycles without progress, by action (escalate, fail)',
    labelNames: ['action'],
    registers: [this.registry],
  });
  readonly budgetEvents = new Counter({
    name: 'deepq_budget_events_total',
    help: 'Budgets that ran out, by kind (tokens, steps, seconds) and action (pause, end)',
    labelNames: ['kind', 'action'],
    registers: [this.registry],
  });
  readonly decisions = new Counter({
    name: 'deepq_reflection_decisions_total',
    help: 'Reflection decisions',
    labelNames: ['decision'],
    registers: [this.registry],
  });
  readonly vfsBytes = new Gauge({
    name: 'deepq_vfs_bytes',
    help:
      'Bytes of live artifacts across all goals, inline (Redis) vs spilled (blob store); ' +
      'measured by each sweep in the reflector',
    labelNames: ['storage'],
    registers: [this.registry],
  });
  readonly vfsWritten = new Counter({
    name: 'deepq_vfs_written_bytes_total',
    help: 'Artifact bytes written by this process, inline vs spilled',
    labelNames: ['storage'],
    registers: [this.registry],
  });
  readonly vfsEvictions = new Counter({
    name: 'deepq_vfs_evictions_total',
    help: 'Artifacts evicted from the virtual FS',
    labelNames: ['reason'],
    registers: [this.registry],
  });
  readonly redisFull = new Counter({
    name: 'deepq_redis_full_total',
    help: 'Writes Redis refused at maxmemory (noeviction): a job handed back (job) or fetching paused (fetch)',
    labelNames: ['where'],
    registers: [this.registry],
  });
  readonly reconciled = new Counter({
    name: 'deepq_reconciled_total',
    help: 'Goals whose missing next job the reconciler added again, by the status they were in',
    labelNames: ['from_status'],
    registers: [this.registry],
  });
  readonly sweptGoals = new Counter({
    name: 'deepq_swept_goals_total',
    help: 'Goals removed by the TTL sweep',
    labelNames: ['reason'],
    registers: [this.registry],
  });
  readonly contractRejections = new Counter({
    name: 'deepq_contract_rejections_total',
    help: 'Model outputs rejected by their output contract',
    labelNames: ['role', 'outcome'],
    registers: [this.registry],
  });
  readonly approvals = new Counter({
    name: 'deepq_approvals_total',
    help:
      'Decisions on tool calls that waited for a human: counted when the paused job takes them up, a timeout ' +
      'when it is decided (by the resume or the reflector sweep)',
    labelNames: ['decision'],
    registers: [this.registry],
  });
  readonly approvalsPending = new Gauge({
    name: 'deepq_approvals_pending',
    help: 'Tool calls waiting for a human decision, across all goals (read from Redis at scrape time)',
    registers: [this.registry],
  });
  readonly redisUp = new Gauge({
    name: 'deepq_redis_up',
    help: 'Whether this process reached Redis at its last scrape (1) or not (0: the queue gauges are stale)',
    registers: [this.registry],
  });
  readonly sandboxRuns = new Counter({
    name: 'deepq_sandbox_runs_total',
    help:
      'run_code / run_tests runs, by role and outcome (ok, nonzero_exit, timeout, memory, output_limit, ' +
      'error: a cancel, the process limit, or a failure before the program started)',
    labelNames: ['role', 'outcome'],
    registers: [this.registry],
  });
  readonly sandboxSeconds = new Histogram({
    name: 'deepq_sandbox_seconds',
    help: 'Wall time of a sandboxed run, start to the whole process tree gone',
    labelNames: ['role'],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
    registers: [this.registry],
  });

  constructor(defaultLabels: Record<string, string> = {}) {
    this.registry.setDefaultLabels(defaultLabels);
    collectDefaultMetrics({ register: this.registry, prefix: 'deepq_' });
  }
}
