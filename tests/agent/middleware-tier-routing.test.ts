// Model-tier routing: each agent asks for a tier (HIGH/LOW); the middleware sends the model
// id that config maps it to (DEEPQ_MODEL_HIGH / DEEPQ_MODEL_LOW, or the config file).

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { plannerSpec } from '../../services/planner/prompt.ts';
import { reflectorSpec } from '../../services/reflector/prompt.ts';
import { createAgent } from '../../shared/agent/create-agent.ts';
import { tierRouting } from '../../shared/agent/middleware/tier-routing.ts';
import { textContract } from '../../shared/agent/output-contracts.ts';
import { createProvider } from '../../shared/agent/providers/index.ts';
import type { AgentSpec } from '../../shared/agent/roles.ts';
import type { Config } from '../../shared/runtime/config.ts';
import { captureLogger, ctxFor, testConfig, UNUSED_REDIS_URL } from '../../testing/agent-harness.ts';
import {
  defaultAnswer,
  type MessagesApiServer,
  startMessagesApiServer,
  text,
} from '../../testing/messages-api-server.ts';
import { tempDir } from '../../testing/temp-dir.ts';

let server: MessagesApiServer;
before(async () => {
  server = await startMessagesApiServer({ handler: (body) => text(defaultAnswer(body)) });
});
after(async () => {
  await server?.close();
});

async function modelSent(cfg: Config, spec: AgentSpec): Promise<string> {
  const agent = createAgent(spec, {
    provider: createProvider(cfg),
    logger: captureLogger().logger,
    models: cfg.models,
  });
  const from = server.requests.length;
  await agent.run({ task: 'hi', contract: textContract, ctx: ctxFor('x') });
  const reqs = server.requests.slice(from);
  assert.equal(reqs.length, 1);
  return reqs[0]!.body.model;
}

test('HIGH and LOW map to the model ids from DEEPQ_MODEL_HIGH / DEEPQ_MODEL_LOW', async () => {
  const { cfg } = testConfig(UNUSED_REDIS_URL, server, {
    DEEPQ_MODEL_HIGH: 'model-big-1',
    DEEPQ_MODEL_LOW: 'model-small-1',
  });
  assert.deepEqual(cfg.models, { HIGH: 'model-big-1', LOW: 'model-small-1' });
  const role = (n: string) => cfg.roles.find((r) => r.name === n)!;
  const cases: [string, AgentSpec, string][] = [
    ['planner', plannerSpec(cfg), 'model-big-1'],
    ['reflector', reflectorSpec(cfg), 'model-small-1'],
    ['research-specialist', role('research-specialist'), 'model-small-1'],
    ['code-writer', role('code-writer'), 'model-big-1'],
    ['critic', role('critic'), 'model-small-1'],
  ];
  for (const [name, spec, model] of cases)
    assert.equal(await modelSent(cfg, spec), model, `${name} (tier ${spec.tier})`);
});

test("a role's tier and the tier map are config: changing them changes the model, not the code", async () => {
  const dir = tempDir('deepq-tier-');
  const file = join(dir, 'deepq.yaml');
  writeFileSync(
    file,
    [
      'models: { HIGH: file-high, LOW: file-low }',
      'reflector: { tier: HIGH }',
      'roles:',
      '  - { name: researcher, systemPrompt: "You research.", tier: HIGH, contract: summary }',
      '  - { name: coder, systemPrompt: "You code.", tier: LOW, contract: code }',
      '  - { name: reviewer, systemPrompt: "You review.", contract: critique }',
    ].join('\n'),
  );
  const { cfg } = testConfig(UNUSED_REDIS_URL, server, {
    DEEPQ_CONFIG: file,
    DEEPQ_MODEL_HIGH: '',
    DEEPQ_MODEL_LOW: '',
  });
  assert.deepEqual(cfg.models, { HIGH: 'file-high', LOW: 'file-low' });
  const role = (n: string) => cfg.roles.find((r) => r.name === n)!;
  assert.equal(await modelSent(cfg, role('researcher')), 'file-high');
  assert.equal(await modelSent(cfg, role('coder')), 'file-low');
  assert.equal(await modelSent(cfg, role('reviewer')), 'file-high', 'the default tier is HIGH');
  assert.equal(await modelSent(cfg, reflectorSpec(cfg)), 'file-high');
  // The environment overrides the file.
  const { cfg: cfg2 } = testConfig(UNUSED_REDIS_URL, server, {
    DEEPQ_CONFIG: file,
    DEEPQ_MODEL_HIGH: 'env-high',
    DEEPQ_MODEL_LOW: '',
  });
  assert.deepEqual(cfg2.models, { HIGH: 'env-high', LOW: 'file-low' });
});

test('the middleware replaces the model by the tier map entry of the call context', async () => {
  const seen: string[] = [];
  const mw = tierRouting({ models: { HIGH: 'h', LOW: 'l' } });
  const next = async (req: { model: string }) => {
    seen.push(req.model);
    return { model: req.model, content: [], stop_reason: 'end_turn', usage: { input_tokens: 0, output_tokens: 0 } };
  };
  const req = { model: 'HIGH', system: 's', messages: [], max_tokens: 1 };
  await mw(req, { role: 'r', kind: 'subagent', contract: 'text', tier: 'LOW' }, next);
  await mw(req, { role: 'r', kind: 'subagent', contract: 'text', tier: 'HIGH' }, next);
  assert.deepEqual(seen, ['l', 'h']);
});

test('without tier routing the bare tier name goes out (it fails loudly, never a silent default)', async () => {
  const { cfg } = testConfig(UNUSED_REDIS_URL, server);
  const research = cfg.roles.find((r) => r.name === 'research-specialist')!;
  assert.equal(research.tier, 'LOW');
  assert.equal(await modelSent(cfg, { ...research, middleware: [] }), 'LOW');
});
