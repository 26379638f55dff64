// A role's `effort` (how much the model puts into an answer) reaches the wire of both model
// APIs, through the real SDKs against the local servers, which refuse a value the real APIs
// refuse: Anthropic's `output_config.effort`, OpenAI's `reasoning_effort`; a role without it
// sends neither. The config names a bad value's field; the planner and reflector take it too.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { plannerSpec } from '../../services/planner/prompt.ts';
import { createAgent } from '../../shared/agent/create-agent.ts';
import { textContract } from '../../shared/agent/output-contracts.ts';
import { OpenAIProvider } from '../../shared/agent/providers/openai.ts';
import type { ModelProvider } from '../../shared/agent/providers/types.ts';
import { RoleSpecSchema } from '../../shared/agent/roles.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { anthropicAt, captureLogger, ctxFor, useMessagesApi } from '../../testing/agent-harness.ts';
import {
  type ChatCompletionsServer,
  FAKE_OPENAI_KEY,
  say,
  startChatCompletionsServer,
} from '../../testing/chat-completions-server.ts';
import { type MessagesApiServer, text } from '../../testing/messages-api-server.ts';
import { writeConfig } from '../providers/harness.ts';

let messagesApi: MessagesApiServer;
useMessagesApi(null, (s) => (messagesApi = s));
let chat: ChatCompletionsServer;
before(async () => {
  chat = await startChatCompletionsServer();
});
after(() => chat?.close());

async function runWith(provider: ModelProvider, effort?: string) {
  const spec = RoleSpecSchema.parse({ name: 'r', systemPrompt: 'You answer.', ...(effort ? { effort } : {}) });
  const agent = createAgent(spec, { provider, logger: captureLogger().logger, models: { HIGH: 'h', LOW: 'l' } });
  return agent.run({ task: 'Answer.', contract: textContract, ctx: ctxFor('r') });
}

test("Anthropic: a role's effort goes out as output_config.effort; none without it", async () => {
  messagesApi.setHandler(() => text('done'));
  const from = messagesApi.requests.length;
  assert.equal((await runWith(anthropicAt(messagesApi), 'high')).ok, true);
  assert.equal((await runWith(anthropicAt(messagesApi))).ok, true);
  const [withEffort, without] = messagesApi.requests.slice(from);
  assert.equal(withEffort!.response?.kind, 'message', JSON.stringify(withEffort!.response));
  assert.deepEqual(withEffort!.body.output_config, { effort: 'high' });
  assert.equal(without!.body.output_config, undefined);
});

test("OpenAI-compatible: a role's effort goes out as reasoning_effort; none without it", async () => {
  chat.setHandler(() => say('done'));
  const provider = new OpenAIProvider({
    name: 'local',
    baseURL: chat.baseURL,
    apiKey: FAKE_OPENAI_KEY,
    timeoutMs: 5000,
  });
  const from = chat.requests.length;
  assert.equal((await runWith(provider, 'low')).ok, true);
  assert.equal((await runWith(provider)).ok, true);
  const [withEffort, without] = chat.requests.slice(from);
  assert.equal(withEffort!.response?.kind, 'completion', JSON.stringify(withEffort!.response));
  assert.equal((withEffort!.body as { reasoning_effort?: string }).reasoning_effort, 'low');
  assert.equal('reasoning_effort' in (without!.body as object), false);
});

test('the config: a bad effort is refused naming its field; the planner and reflector take one', () => {
  const bad = writeConfig({ roles: [{ name: 'critic', effort: 'extreme' }] });
  assert.throws(
    () => loadConfig({ DEEPQ_CONFIG: bad }),
    /roles\.0\.effort: Invalid option: expected one of "low"\|"medium"\|"high"\|"xhigh"\|"max"/,
  );
  const good = writeConfig({ planner: { effort: 'max' }, reflector: { effort: 'low' } });
  const cfg = loadConfig({ DEEPQ_CONFIG: good });
  assert.equal(plannerSpec(cfg).effort, 'max');
  assert.equal(cfg.reflector.effort, 'low');
});
