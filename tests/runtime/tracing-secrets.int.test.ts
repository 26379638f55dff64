// A model endpoint's error can echo the key it was sent (`401 key … is not valid`): the failed
// span's status and exception carry the message scrubbed of the process's secrets, as its logs
// do. The real OpenTelemetry SDK exports to a local OTLP receiver; the real openai SDK calls
// the local Chat Completions server.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OpenAIProvider } from '../../shared/agent/providers/openai.ts';
import { inSpan, startTracing, stopTracing } from '../../shared/runtime/tracing.ts';
import { startChatCompletionsServer } from '../../testing/chat-completions-server.ts';
import { startOtlpReceiver } from '../../testing/otlp-receiver.ts';

test("a failed model call's span never carries the API key the endpoint echoed", async () => {
  const receiver = await startOtlpReceiver();
  const server = await startChatCompletionsServer();
  const key = `gw-team-key-${Math.random().toString(36).slice(2, 12)}`;
  try {
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.url;
    process.env.OTEL_BSP_SCHEDULE_DELAY = '50';
    assert.ok(await startTracing('worker-test', undefined, process.env, [key]));
    server.setHandler((_body, _i, req) => ({
      status: 401,
      body: { error: { message: `key ${req.apiKey} is not valid for this team`, type: 'invalid_request_error' } },
    }));
    const provider = new OpenAIProvider({ name: 'gw', baseURL: server.baseURL, apiKey: key, timeoutMs: 2000 });
    const req = { model: 'm', system: 's', messages: [{ role: 'user' as const, content: 'hi' }], max_tokens: 10 };
    const ctx = { role: 'r', kind: 'subagent' as const, contract: 'text' as const, tier: 'LOW' as const };
    await assert.rejects(
      inSpan('chat gw:m', {}, () => provider.createMessage(req, ctx)),
      /401/,
    );
    await stopTracing();
    const span = receiver.spans.find((s) => s.name === 'chat gw:m');
    assert.ok(span, `spans: ${receiver.spans.map((s) => s.name)}`);
    assert.match(span.status?.message ?? '', /401 key \*\*\* is not valid/);
    assert.ok(!JSON.stringify(receiver.spans).includes(key), 'the key reached the collector');
  } finally {
    await stopTracing();
    await Promise.all([receiver.close(), server.close()]);
  }
});
