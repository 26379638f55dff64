// Extended thinking through the real @anthropic-ai/sdk against the local Messages-API server,
// which signs each thinking block and refuses one passed back changed, or a tool turn sent back
// without its thinking, as the API does: a role's `thinking` reaches the wire (fitted under each
// call's max_tokens), thinking blocks go back unchanged in a tool loop, the answer is the text
// alone, and stored transcripts and the inspector keep the thinking readable and bounded.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { transcriptPage } from '../../services/ui/views/transcript-page.ts';
import { createAgent } from '../../shared/agent/create-agent.ts';
import { codeContract, textContract } from '../../shared/agent/output-contracts.ts';
import { thinkingWithin } from '../../shared/agent/providers/anthropic.ts';
import { toChatRequest } from '../../shared/agent/providers/openai-wire.ts';
import type { Message } from '../../shared/agent/providers/types.ts';
import { RoleSpecSchema } from '../../shared/agent/roles.ts';
import { compactMessages } from '../../shared/agent/transcripts.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { anthropicAt, captureLogger, ctxFor, useMessagesApi } from '../../testing/agent-harness.ts';
import {
  type MessagesApiServer,
  text,
  thinkingBlock,
  thinkingSignature,
  toolUse,
} from '../../testing/messages-api-server.ts';

let server: MessagesApiServer;
useMessagesApi(null, (s) => (server = s));

function agentWith(thinking: unknown, maxTokens = 4096) {
  const spec = RoleSpecSchema.parse({ name: 'thinker', systemPrompt: 'You code.', tools: [], maxTokens, thinking });
  return createAgent(spec, {
    provider: anthropicAt(server),
    logger: captureLogger().logger,
    models: { HIGH: 'h', LOW: 'l' },
  });
}

const listFiles = { name: 'list_files', description: 'List.', input_schema: { type: 'object', properties: {} } };

test('a thinking role: its budget on the wire, its thinking passed back unchanged through a tool loop', async () => {
  let n = 0;
  server.setHandler(() => (n++ === 0 ? toolUse('list_files', {}, { id: 'toolu_t1' }) : text('```\nprint(1)\n```')));
  const from = server.requests.length;
  const run = await agentWith({ type: 'enabled', budgetTokens: 2048 }).run({
    task: 'Write it.',
    tools: [{ def: listFiles, run: async () => 'a.py' }],
    contract: codeContract,
    ctx: ctxFor('thinker'),
  });
  assert.equal(run.ok, true, JSON.stringify(run));
  const [first, second] = server.requests.slice(from);
  assert.deepEqual(first!.body.thinking, { type: 'enabled', budget_tokens: 2048 });
  assert.equal(second!.response?.kind, 'message', `refused: ${JSON.stringify(second!.response)}`);
  // The first answer's thinking starts the assistant turn sent back, exactly as it came.
  const sentBack = second!.body.messages[1]!;
  const answered = (first!.response!.body as { content: { type: string }[] }).content;
  assert.equal(sentBack.role, 'assistant');
  assert.deepEqual((sentBack.content as { type: string }[])[0], answered[0]);
  assert.equal(answered[0]!.type, 'thinking');
  // The answer is the text alone: no thinking in it.
  assert.equal(run.text, '```\nprint(1)\n```');
});

test('the budget fits each call: lowered under a smaller max_tokens, left out below the least', () => {
  const enabled = { type: 'enabled' as const, budget_tokens: 8000 };
  assert.deepEqual(thinkingWithin(enabled, 16000), enabled);
  assert.deepEqual(thinkingWithin(enabled, 3000), { type: 'enabled', budget_tokens: 2999 });
  assert.equal(thinkingWithin(enabled, 1024), undefined, 'no call too small to think in asks for it');
  assert.deepEqual(thinkingWithin({ type: 'adaptive' }, 100), { type: 'adaptive' });
  assert.equal(thinkingWithin(undefined, 4000), undefined);
});

test('adaptive and disabled reach the wire as given; no thinking field when the role sets none', async () => {
  for (const thinking of [{ type: 'adaptive' }, { type: 'disabled' }, undefined]) {
    server.setHandler(() => text('plain'));
    const from = server.requests.length;
    const run = await agentWith(thinking).run({ task: 't', tools: [], contract: textContract, ctx: ctxFor('thinker') });
    assert.equal(run.ok, true);
    assert.deepEqual(server.requests[from]!.body.thinking, thinking);
  }
});

test('a model that thinks unasked: its thinking is kept in the history and sent back', async () => {
  let n = 0;
  server.setHandler(() => {
    const think = thinkingBlock('I was not asked, but I think.');
    return n++ === 0
      ? { ...toolUse('list_files', {}, { id: 'toolu_u1' }), content: [think, ...toolUse('list_files', {}).content] }
      : text('done');
  });
  const from = server.requests.length;
  const run = await agentWith(undefined).run({
    task: 't',
    tools: [{ def: listFiles, run: async () => 'x' }],
    contract: textContract,
    ctx: ctxFor('thinker'),
  });
  assert.equal(run.ok, true, JSON.stringify(run));
  const sent = server.requests[from + 1]!.body.messages[1]!.content as { type: string; signature?: string }[];
  assert.equal(sent[0]!.type, 'thinking');
  assert.equal(sent[0]!.signature, thinkingSignature('I was not asked, but I think.'));
});

test('config: a budget must stay under maxTokens and be at least 1024, named in the error', () => {
  const roles = (thinking: unknown, maxTokens = 4096) => ({ roles: [{ name: 'critic', thinking, maxTokens }] });
  assert.throws(
    () => loadConfig({}, roles({ type: 'enabled', budgetTokens: 4096 })),
    /roles\.0\.thinking\.budgetTokens: budgetTokens \(4096\) must be less than maxTokens \(4096\)/,
  );
  assert.throws(
    () => loadConfig({}, roles({ type: 'enabled', budgetTokens: 500 })),
    /roles\.0\.thinking\.budgetTokens/,
  );
  assert.throws(() => loadConfig({}, roles({ type: 'sometimes' })), /roles\.0\.thinking/);
  assert.throws(
    () => loadConfig({}, { planner: { thinking: { type: 'enabled', budgetTokens: 5000 } } }),
    /planner\.thinking\.budgetTokens: budgetTokens \(5000\) must be less than maxTokens \(4096\)/,
  );
  const ok = loadConfig({}, { reflector: { thinking: { type: 'enabled', budgetTokens: 5000 }, maxTokens: 8000 } });
  assert.deepEqual(ok.reflector.thinking, { type: 'enabled', budgetTokens: 5000 });
});

test('stored transcripts bound the thinking; the inspector shows it escaped; Chat Completions never sees it', () => {
  const long = `<script>alert(1)</script>${'x'.repeat(5000)}`;
  const messages: Message[] = [
    { role: 'user', content: 'task' },
    {
      role: 'assistant',
      content: [
        { type: 'thinking', thinking: long, signature: 'sig' },
        { type: 'redacted_thinking', data: 'opaque'.repeat(100) },
        { type: 'text', text: 'answer' },
      ],
    },
  ];
  const [, stored] = compactMessages(messages, 1000);
  const blocks = stored!.content as { type: string; thinking?: string; signature?: string; data?: string }[];
  assert.ok(blocks[0]!.thinking!.length < 1200 && blocks[0]!.thinking!.includes('elided'), 'the thinking is cut');
  assert.equal(blocks[1]!.data, '', 'redacted data is not kept');
  const page = String(
    transcriptPage({ title: 't' } as never, {
      threadId: 't1',
      role: 'r',
      savedAt: 0,
      messages: stored ? [stored] : [],
      goalId: 'g',
    }),
  );
  assert.ok(page.includes('&lt;script&gt;alert(1)&lt;/script&gt;') && !page.includes('<script>alert'), 'escaped');
  assert.match(page, /thinking \(redacted by the provider\)/);
  const chat = toChatRequest({ model: 'm', system: 's', messages, max_tokens: 100 }, 'max_tokens');
  assert.ok(!JSON.stringify(chat).includes('alert(1)'), 'no thinking in a Chat Completions request');
  assert.deepEqual(chat.messages[2], { role: 'assistant', content: 'answer' });
});
