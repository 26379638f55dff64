// The SDKs' own environment settings do not reach deepq's calls: headers from
// ANTHROPIC_CUSTOM_HEADERS / OPENAI_CUSTOM_HEADERS are not sent (they went to every endpoint of
// that type, a local gateway included), configured headers are, and ANTHROPIC_LOG prints nothing
// (its request dumps skip pino's secret scrubbing). Real SDKs against the local test servers.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { AnthropicProvider } from '../../shared/agent/providers/anthropic.ts';
import { OpenAIProvider } from '../../shared/agent/providers/openai.ts';
import type { CallContext, ModelRequest } from '../../shared/agent/providers/types.ts';
import {
  type ChatCompletionsServer,
  FAKE_OPENAI_KEY,
  startChatCompletionsServer,
} from '../../testing/chat-completions-server.ts';
import { FAKE_API_KEY, type MessagesApiServer, startMessagesApiServer } from '../../testing/messages-api-server.ts';

let messages: MessagesApiServer;
let chat: ChatCompletionsServer;
const saved = { ...process.env };
before(async () => {
  [messages, chat] = await Promise.all([startMessagesApiServer(), startChatCompletionsServer()]);
  process.env.ANTHROPIC_CUSTOM_HEADERS = 'x-team-token: anthropic-team-secret\nx-other: 1';
  process.env.OPENAI_CUSTOM_HEADERS = 'x-team-token: openai-org-secret';
  process.env.ANTHROPIC_LOG = 'debug';
  process.env.OPENAI_LOG = 'debug';
});
after(async () => {
  process.env = saved;
  await Promise.all([messages?.close(), chat?.close()]);
});

const CTX: CallContext = { role: 'r', kind: 'subagent', contract: 'text', tier: 'LOW' };
const REQ: ModelRequest = {
  model: 'm',
  system: 'Be brief.',
  messages: [{ role: 'user', content: 'hi' }],
  max_tokens: 64,
};
const configured = { 'x-configured': 'from-deepq-config' };

/** What the console printed while `fn` ran. */
async function printed(fn: () => Promise<unknown>): Promise<string> {
  const out: string[] = [];
  const methods = ['log', 'info', 'debug', 'warn', 'error'] as const;
  const kept = methods.map((m) => console[m]);
  for (const m of methods) console[m] = (...args: unknown[]) => void out.push(args.map(String).join(' '));
  try {
    await fn();
  } finally {
    methods.forEach((m, i) => {
      console[m] = kept[i]!;
    });
  }
  return out.join('\n');
}

test('anthropic: env headers are not sent, configured ones are; ANTHROPIC_LOG prints nothing', async () => {
  const p = new AnthropicProvider({
    apiKey: FAKE_API_KEY,
    baseURL: messages.url,
    timeoutMs: 10_000,
    headers: configured,
  });
  const logs = await printed(() => p.createMessage(REQ, CTX));
  const seen = messages.requests.at(-1)!.headers;
  assert.equal(seen['x-configured'], 'from-deepq-config');
  assert.equal(seen['x-team-token'], undefined, 'a header from ANTHROPIC_CUSTOM_HEADERS was sent');
  assert.equal(seen['x-other'], undefined);
  assert.equal(logs, '', `the SDK printed: ${logs.slice(0, 300)}`);
});

test('openai: headers from the environment are not sent, configured ones are', async () => {
  const p = new OpenAIProvider({
    name: 'local',
    baseURL: chat.baseURL,
    apiKey: FAKE_OPENAI_KEY,
    timeoutMs: 10_000,
    headers: configured,
  });
  const logs = await printed(() => p.createMessage(REQ, CTX));
  const seen = chat.requests.at(-1)!.headers;
  assert.equal(seen['x-configured'], 'from-deepq-config');
  assert.equal(seen['x-team-token'], undefined, 'a header from OPENAI_CUSTOM_HEADERS was sent');
  assert.equal(logs, '');
});
