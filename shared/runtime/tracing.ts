// OpenTelemetry traces: one trace per goal across processes. Off unless an OTLP endpoint is set
// (the standard OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). On, BullMQ
// carries the trace context from each job's add to its processing (bullmq-otel), so the CLI's
// enqueue, each plan, subtask and reflection job and the next cycle's plan are one tree; deepq
// adds a span per model call and per tool call. Off, no OpenTelemetry module is even loaded:
// the hot path pays one check per call (`npm run bench` runs with tracing off).

import { createHash } from 'node:crypto';
import type { Attributes, Span, SpanKind } from '@opentelemetry/api';
import type { Telemetry } from 'bullmq';
import type { Logger } from 'pino';
import { ConfigError } from '../errors.ts';
import { scrubSecrets } from './scrub.ts';
import { throttled } from './throttle.ts';

type Api = typeof import('@opentelemetry/api');

interface Tracing {
  api: Api;
  tracer: ReturnType<Api['trace']['getTracer']>;
  telemetry: Telemetry;
  shutdown(): Promise<void>;
}

let on: Tracing | undefined;
/** The process's secrets (API keys, the UI token): scrubbed from what a failed span says. */
let spanSecrets: string[] = [];

const ENDPOINT_VARS = ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OTEL_EXPORTER_OTLP_ENDPOINT'] as const;

/** Whether this process should trace: an OTLP endpoint is set, and the SDK is not disabled. */
export function tracingWanted(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  const exporter = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  if (exporter && exporter !== 'otlp') return false;
  return ENDPOINT_VARS.some((v) => Boolean(env[v]?.trim()));
}

/** A set endpoint that is not an http(s) URL stops the process at start, naming the variable. */
function checkEndpoints(env: NodeJS.ProcessEnv): void {
  for (const name of ENDPOINT_VARS) {
    const value = env[name]?.trim();
    if (!value) continue;
    let url: URL | undefined;
    try {
      url = new URL(value);
    } catch {
      /* reported below */
    }
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:'))
      throw new ConfigError(`${name}: must be an http:// or https:// URL (an OTLP/HTTP endpoint), got "${value}"`);
  }
}

/**
 * Starts tracing for this process as `deepq-<service>` (OTEL_SERVICE_NAME overrides it), if
 * wanted; returns whether it is on. Call it before the first BullMQ queue or worker is made:
 * they take their telemetry when built. The SDK's own complaints (an unreachable collector)
 * go to `logger` as warnings, at most one per 30 s.
 */
export async function startTracing(
  service: string,
  logger?: Logger,
  env = process.env,
  secrets: string[] = [],
): Promise<boolean> {
  if (on || !tracingWanted(env)) return Boolean(on);
  spanSecrets = secrets;
  checkEndpoints(env);
  const [api, node, otlp, resources, { BullMQOtel }] = await Promise.all([
    import('@opentelemetry/api'),
    import('@opentelemetry/sdk-trace-node'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('bullmq-otel'),
  ]);
  if (logger) api.diag.setLogger(throttledDiag(logger), api.DiagLogLevel.WARN);
  const named = resources.resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME || `deepq-${service}` });
  const provider = new node.NodeTracerProvider({
    // OTEL_RESOURCE_ATTRIBUTES adds to it (deployment.environment, k8s names, ...).
    resource: resources.detectResources({ detectors: [resources.envDetector] }).merge(named),
    spanProcessors: [new node.BatchSpanProcessor(new otlp.OTLPTraceExporter())],
    idGenerator: goalIds(new node.RandomIdGenerator()),
    // OTEL_TRACES_SAMPLER, when set, decides; else every goal is traced, BullMQ's idle chores are not.
    ...(env.OTEL_TRACES_SAMPLER ? {} : { sampler: new node.ParentBasedSampler({ root: withoutChores(node) }) }),
  });
  provider.register();
  on = {
    api,
    tracer: api.trace.getTracer('deepq'),
    telemetry: new BullMQOtel({ tracerName: 'bullmq' }) as unknown as Telemetry,
    shutdown: () => provider.shutdown(),
  };
  return true;
}

/**
 * BullMQ's periodic work of each worker (its stalled-job check every 30 s, its close) makes a
 * trace of its own each time: noise beside the goals' traces, so such a root span is dropped.
 * A span with a parent follows its parent's decision (ParentBasedSampler).
 */
const CHORES = /^(startStalledCheckTimer|moveStalledJobsToWait|close|getNextJob)( |$)/;
function withoutChores(node: typeof import('@opentelemetry/sdk-trace-node')) {
  return {
    shouldSample: (_ctx: unknown, _trace: string, name: string) => ({
      decision: CHORES.test(name) ? node.SamplingDecision.NOT_RECORD : node.SamplingDecision.RECORD_AND_SAMPLED,
    }),
    toString: () => 'deepq: no BullMQ chores',
  };
}

/** How long a stop waits for the last spans to reach the collector. */
const FLUSH_TIMEOUT_MS = 5000;

/** Sends what is buffered and stops; a no-op when tracing is off. Never throws, never hangs. */
export async function stopTracing(): Promise<void> {
  const t = on;
  if (!t) return;
  on = undefined;
  await Promise.race([t.shutdown().catch(() => {}), new Promise((r) => setTimeout(r, FLUSH_TIMEOUT_MS).unref())]);
}

/** The active span's ids for a log line (`trace_id`, `span_id`, OpenTelemetry's names); none when off.
 *  A new object each time: pino merges the line's fields into it. */
export function traceIdsForLog(): Record<string, string> {
  const span = on?.api.trace.getActiveSpan();
  if (!span) return {};
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}

/** Whether this process traces (startTracing turned it on). */
export function tracingOn(): boolean {
  return on !== undefined;
}

/** BullMQ's `telemetry` option: set while tracing is on, undefined (no cost) otherwise. */
export function bullTelemetry(): Telemetry | undefined {
  return on?.telemetry;
}

/** What may be an attribute: a job's data is untrusted (any JSON), so anything else is left out. */
const ATTR_CHARS = 200;
function asAttributes(attrs: SpanAttrs): Attributes {
  const out: Attributes = {};
  for (const [k, v] of Object.entries(attrs)) {
    if (typeof v === 'string') out[k] = v.slice(0, ATTR_CHARS);
    else if (typeof v === 'number' || typeof v === 'boolean') out[k] = v;
    else if (Array.isArray(v)) out[k] = v.filter((x) => typeof x === 'string').map((x) => x.slice(0, ATTR_CHARS));
  }
  return out;
}

export type SpanAttrs = Record<string, unknown>;
export type { Span };
/** SpanKind.CLIENT (a call out of the process), without loading the API to name it. */
export const SPAN_KIND_CLIENT = 2 as SpanKind;

/**
 * Runs `fn` in a span named `name` (a child of the active one): ended when `fn` settles, its
 * status an error when `fn` throws. With tracing off, `fn` runs as is, given no span.
 */
export async function inSpan<T>(
  name: string,
  attrs: SpanAttrs,
  fn: (span: Span | undefined) => Promise<T>,
  kind?: SpanKind,
): Promise<T> {
  const t = on;
  if (!t) return fn(undefined);
  return t.tracer.startActiveSpan(name, { attributes: asAttributes(attrs), kind }, (span) => settled(span, fn));
}

/** Runs `fn` with its span, ending the span when `fn` settles; a throw marks it failed. */
async function settled<T>(span: Span, fn: (span: Span) => Promise<T>): Promise<T> {
  try {
    return await fn(span);
  } catch (err) {
    failSpan(span, err);
    throw err;
  } finally {
    span.end();
  }
}

/**
 * A goal's trace ids, derived from its id: any process can join the goal's trace (a resume, a
 * cancel, the reconciler's repair) without reading where it started, and an operator finds it
 * in a trace backend from the goal id alone. The trace id is the first 32 hex digits of
 * sha256("deepq:<goalId>"); the root span's id the next 16.
 */
export function goalTraceIds(goalId: string): { traceId: string; spanId: string } {
  const hex = createHash('sha256').update(`deepq:${goalId}`).digest('hex');
  return { traceId: hex.slice(0, 32), spanId: hex.slice(32, 48) };
}

/** The ids the next root span takes (set only while one is started: see goalIds). */
let rootIds: { traceId: string; spanId: string } | undefined;

/** The SDK's random ids, but a goal's root span (inGoalRoot) gets the goal's own. */
function goalIds(random: { generateTraceId(): string; generateSpanId(): string }) {
  return {
    generateTraceId: () => rootIds?.traceId ?? random.generateTraceId(),
    generateSpanId: () => rootIds?.spanId ?? random.generateSpanId(),
  };
}

/** Runs `fn` in the root span of the goal's trace (its enqueue), with the goal's trace ids. */
export function inGoalRoot<T>(goalId: string, name: string, attrs: SpanAttrs, fn: () => Promise<T>): Promise<T> {
  const t = on;
  if (!t) return fn();
  rootIds = goalTraceIds(goalId);
  try {
    // The span is made before the callback runs (synchronously): spans inside it take random ids.
    return t.tracer.startActiveSpan(name, { attributes: asAttributes(attrs), root: true }, (span) => {
      rootIds = undefined;
      return settled(span, fn);
    });
  } finally {
    rootIds = undefined;
  }
}

/** Runs `fn` in a span of the goal's trace, under its root, whatever trace is active here. */
export function inGoalTrace<T>(goalId: string, name: string, attrs: SpanAttrs, fn: () => Promise<T>): Promise<T> {
  const t = on;
  if (!t) return fn();
  const root = { ...goalTraceIds(goalId), traceFlags: t.api.TraceFlags.SAMPLED, isRemote: true };
  const parent = t.api.trace.setSpanContext(t.api.ROOT_CONTEXT, root);
  return t.tracer.startActiveSpan(name, { attributes: asAttributes(attrs) }, parent, (span) => settled(span, fn));
}

/**
 * Runs a job's handler in its goal's trace when the job carries no trace context: a producer
 * that does not trace (a `deepq enqueue` without the OTLP variables, an application's own
 * client) adds jobs without one, and BullMQ then starts the job's processing span in a trace of
 * its own. The handler's spans, and the jobs it adds, join the goal's trace under its root instead.
 */
export function inJobGoalTrace<T>(
  job: { queueName: string; data?: { goalId?: unknown; step?: unknown }; opts?: { telemetry?: { metadata?: string } } },
  fn: () => Promise<T>,
): Promise<T> {
  const goalId = job.data?.goalId;
  if (!on || job.opts?.telemetry?.metadata || typeof goalId !== 'string') return fn();
  const attrs = { 'deepq.goal.id': goalId, 'deepq.step': job.data?.step, 'deepq.queue': job.queueName };
  return inGoalTrace(goalId, `deepq ${job.queueName} job`, attrs, fn);
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const CONTROLS = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/g;

/** What a failed span says: the error's kind and its first line, cut short, no control characters
 *  (a tool's error can echo what the model wrote). */
export function failSpan(span: Span, err: unknown): void {
  // An endpoint's error may echo the API key it was sent (`401 key … is not valid`).
  const text = scrubSecrets(err instanceof Error ? err.message : String(err), spanSecrets);
  const message = text.replace(CONTROLS, ' ');
  // 2 is SpanStatusCode.ERROR (the API is not loaded to name it).
  span.setStatus({ code: 2, message: message.split('\n', 1)[0]!.slice(0, 300) });
  if (err instanceof Error) span.recordException({ name: err.name, message: message.slice(0, 300) });
}

/** Adds attributes to the active span (a BullMQ job's processing span); a no-op when off. */
export function annotateActiveSpan(attrs: SpanAttrs): void {
  on?.api.trace.getActiveSpan()?.setAttributes(asAttributes(attrs));
}

/** Sets attributes on `span` when there is one. */
export function annotate(span: Span | undefined, attrs: SpanAttrs): void {
  span?.setAttributes(asAttributes(attrs));
}

const DIAG_EVERY_MS = 30_000;

/** The SDK's diagnostics as warnings in the service's log, one per 30 s with a count of the rest. */
function throttledDiag(logger: Logger) {
  // One key for all: a collector that does not answer says so in several ways at once.
  const log = throttled<{ message: string; detail: string }>(DIAG_EVERY_MS, (_key, repeated, line) =>
    logger.warn({ ...repeated, detail: line.detail }, `tracing: ${line.message}`),
  );
  const say = (message: string, ...args: unknown[]) => {
    const detail = args.map((a) => (a instanceof Error ? a.message : String(a))).join(' ');
    log('tracing', { message, detail: detail.slice(0, 500) });
  };
  const quiet = () => {};
  return { error: say, warn: say, info: quiet, debug: quiet, verbose: quiet };
}
