// When a process traces: only with an OTLP endpoint, never with the SDK disabled or another
// exporter chosen; and with tracing off, spans cost nothing and BullMQ gets no telemetry.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { bullTelemetry, failSpan, inSpan, type Span, tracingWanted } from '../../shared/runtime/tracing.ts';

test('tracing is wanted only with an OTLP endpoint and not disabled', () => {
  assert.equal(tracingWanted({}), false);
  assert.equal(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: '' }), false, 'compose passes an unset variable as empty');
  assert.equal(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }), false);
  assert.equal(tracingWanted({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel:4318' }), true);
  assert.equal(tracingWanted({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://otel:4318/v1/traces' }), true);
  const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel:4318' };
  assert.equal(tracingWanted({ ...on, OTEL_SDK_DISABLED: 'true' }), false);
  assert.equal(tracingWanted({ ...on, OTEL_SDK_DISABLED: 'TRUE' }), false);
  assert.equal(tracingWanted({ ...on, OTEL_SDK_DISABLED: 'false' }), true);
  assert.equal(tracingWanted({ ...on, OTEL_TRACES_EXPORTER: 'none' }), false);
  assert.equal(tracingWanted({ ...on, OTEL_TRACES_EXPORTER: 'otlp' }), true);
});

test('with tracing off, a span is just the call and BullMQ gets no telemetry', async () => {
  assert.equal(bullTelemetry(), undefined);
  const seen: unknown[] = [];
  const out = await inSpan('chat x', { a: 1 }, async (span) => {
    seen.push(span);
    return 42;
  });
  assert.equal(out, 42);
  assert.deepEqual(seen, [undefined]);
  await assert.rejects(
    inSpan('boom', {}, async () => {
      throw new Error('kept');
    }),
    /kept/,
  );
});

test('with tracing off, the services load no OpenTelemetry module', async () => {
  await Promise.all([
    import('../../shared/agent/create-agent.ts'),
    import('../../shared/runtime/service.ts'),
    import('../../shared/runtime/queues.ts'),
    import('../../cli/goal-client.ts'),
  ]);
  const loaded = Object.keys(createRequire(import.meta.url).cache).filter((f) => f.includes('@opentelemetry'));
  assert.deepEqual(loaded, []);
});

test('a failed span says the first line of the error, without control characters, cut short', () => {
  const seen: { status?: { code: number; message?: string }; exception?: { name: string; message: string } } = {};
  const span = {
    setStatus: (s: { code: number; message?: string }) => (seen.status = s),
    recordException: (e: { name: string; message: string }) => (seen.exception = e),
  } as unknown as Span;
  failSpan(span, new TypeError(`bad \x1b[31mred\x07 ${'x'.repeat(400)}\nsecond line`));
  assert.equal(seen.status?.code, 2);
  assert.ok(seen.status?.message?.startsWith('bad  [31mred  xxx'), seen.status?.message);
  assert.equal(seen.status?.message?.length, 300);
  assert.equal(seen.exception?.name, 'TypeError');
  const recorded = seen.exception?.message ?? '';
  assert.ok(!recorded.includes('\x1b') && !recorded.includes('\x07'), 'no escape or bell');
});
