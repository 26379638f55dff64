// The seed's P52 regression test (seed 000, "Unit test — regression test for P52"), against
// the real Anthropic API. It runs only when ANTHROPIC_API_KEY is set and reports itself
// skipped otherwise. Models come from config (DEEPQ_MODEL_HIGH / DEEPQ_MODEL_LOW).
//
// Each subagent is built by the one factory from its role spec, right after the planner
// has run in the same process, and gets a fresh conversation with the probe alone. Its
// answer must hold the expected keywords, none of the planner's, and pass its contract.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { planContract } from '../../services/planner/plan-contract.ts';
import { plannerSpec } from '../../services/planner/prompt.ts';
import { createAgent } from '../../shared/agent/create-agent.ts';
import { contractFor } from '../../shared/agent/output-contracts.ts';
import { createProvider } from '../../shared/agent/providers/index.ts';
import { type Config, loadConfig, roleNames } from '../../shared/runtime/config.ts';

const skip = !process.env.ANTHROPIC_API_KEY && 'ANTHROPIC_API_KEY not set: live persona-leak test skipped';

const CASES = [
  {
    role: 'research-specialist',
    probe: 'What is the capital of France?',
    expected: ['paris'],
    forbidden: ['decompose', 'subtask', 'delegate', "i'll plan"],
  },
  {
    role: 'code-writer',
    // The seed's code-writer prompt says "Python"; deepq's says "code", so the probe does.
    probe: 'Write a Python function that returns the sum of two integers.',
    expected: ['def ', 'return'],
    forbidden: ['decompose', 'subtask', 'clarifying question'],
  },
  {
    role: 'critic',
    probe: 'Review this code: `def add(a,b): return a-b`. Spec: add two numbers.',
    expected: ['"issue"', '"severity"'],
    forbidden: ['decompose', 'let me plan'],
  },
];

function live(): { cfg: Config; deps: Parameters<typeof createAgent>[1] } {
  const cfg = loadConfig({ ...process.env, DEEPQ_MODEL_PROVIDER: 'anthropic' });
  return { cfg, deps: { provider: createProvider(cfg), logger: pino({ level: 'silent' }), models: cfg.models } };
}

test('P52 live: no subagent answers in the planner persona', { skip, timeout: 300_000 }, async (t) => {
  const { cfg, deps } = live();
  // The planner runs first, in this process, with the same factory.
  const planner = createAgent(plannerSpec(cfg), deps);
  const plan = await planner.run({
    task: [
      'Goal: Write a function that adds two numbers and review it',
      'Cycle: 1',
      'Current files:',
      '(no files)',
      'Prior plan: (none)',
      'Last reflection: (none)',
    ].join('\n'),
    contract: planContract(roleNames(cfg), []),
    ctx: { role: 'planner', kind: 'planner' },
  });
  assert.equal(plan.ok, true, `the planner itself broke its contract: ${plan.problem}`);

  for (const c of CASES) {
    await t.test(c.role, async () => {
      const spec = cfg.roles.find((r) => r.name === c.role);
      assert.ok(spec, `role ${c.role} is configured`);
      const run = await createAgent(spec, deps).run({
        task: c.probe,
        contract: contractFor(spec.contract),
        ctx: { role: c.role, kind: 'subagent' },
      });
      const lo = run.text.toLowerCase();
      for (const kw of c.expected)
        assert.ok(
          lo.includes(kw.toLowerCase()),
          `${c.role}: missing expected keyword ${JSON.stringify(kw)} in output:\n${run.text}`,
        );
      for (const kw of c.forbidden)
        assert.ok(
          !lo.includes(kw.toLowerCase()),
          `${c.role}: planner-persona keyword ${JSON.stringify(kw)} leaked (P52 regression):\n${run.text}`,
        );
      assert.equal(run.ok, true, `${c.role}: ${run.problem}`);
    });
  }
});
