// Handoff contracts (seed 000): each role's output contract; output that breaks it is
// rejected and retried once with a reminder naming the problem (seen by the model in the
// second request); a second failure marks the subtask failed with the reason, which the
// reflector sees; a planner failing twice fails the goal with the reason.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { planContract } from '../../services/planner/plan-contract.ts';
import { plannerSpec } from '../../services/planner/prompt.ts';
import { reflectionContract } from '../../services/reflector/decision-contract.ts';
import { reflectorSpec } from '../../services/reflector/prompt.ts';
import { createAgent } from '../../shared/agent/create-agent.ts';
import {
  codeContract,
  contractFor,
  critiqueContract,
  type OutputContract,
  summaryContract,
} from '../../shared/agent/output-contracts.ts';
import type { AgentSpec } from '../../shared/agent/roles.ts';
import { roleNames } from '../../shared/runtime/config.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { anthropicEnv, ctxFor, useMessagesApi } from '../../testing/agent-harness.ts';
import { type Fleet, startFleet } from '../../testing/fleet.ts';
import {
  blockText,
  defaultHandler,
  firstUserText,
  type MessageReply,
  type MessagesApiServer,
  type RecordedRequest,
  roleOf,
  text,
  toolUse,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
let server: MessagesApiServer;
let rt: Runtime;
useMessagesApi(
  redis,
  (s, r) => {
    server = s;
    rt = r;
  },
  { runtime: true },
);

const ROLES = ['research-specialist', 'code-writer', 'critic'];
const sub = (role: string, artifact: string, read: string[] = []) => ({
  role,
  instruction: `do ${artifact}`,
  expected_artifact: artifact,
  read_files: read,
});

function problemOf(c: OutputContract, out: string): string {
  const r = c.check(out);
  assert.equal(r.ok, false, `expected ${c.name} to reject ${JSON.stringify(out.slice(0, 80))}`);
  return (r as { problem: string }).problem;
}
function accepts(c: OutputContract, out: string): unknown {
  const r = c.check(out);
  assert.equal(
    r.ok,
    true,
    `expected ${c.name} to accept ${JSON.stringify(out.slice(0, 80))}: ${(r as { problem?: string }).problem}`,
  );
  return (r as { value: unknown }).value;
}

test('each default role has its contract: research a summary, code-writer code, critic a critique', () => {
  const byRole = Object.fromEntries(rt.cfg.roles.map((r) => [r.name, r.contract]));
  assert.deepEqual(byRole, { 'research-specialist': 'summary', 'code-writer': 'code', critic: 'critique' });
  assert.equal(plannerSpec(rt.cfg).contract, 'plan');
  assert.equal(reflectorSpec(rt.cfg).contract, 'reflection');
  assert.equal(contractFor('summary'), summaryContract);
});

test('research-specialist: a non-empty summary', () => {
  assert.equal(accepts(summaryContract, '  Paris is the capital [1].  '), 'Paris is the capital [1].');
  assert.match(problemOf(summaryContract, ''), /empty/);
  assert.match(problemOf(summaryContract, ' \n\t '), /empty/);
});

test('code-writer: exactly one fenced code block and nothing else', () => {
  // The value is the code the block holds; stored as a file, it ends with a newline.
  assert.equal(accepts(codeContract, '```python\ndef f():\n    return 1\n```'), 'def f():\n    return 1');
  assert.equal(codeContract.artifact?.('def f():\n    return 1'), 'def f():\n    return 1\n');
  assert.equal(accepts(codeContract, '\n```\nplain\n```\n'), 'plain');
  // Any info string on the opening fence: a language with a symbol, attributes, a trailing space.
  for (const open of ['```c#', '```js title="a.js"', '```python ', '```objective-c++'])
    assert.equal(accepts(codeContract, `${open}\nx\n\`\`\``), 'x', open);
  assert.match(problemOf(codeContract, 'def f(): return 1'), /exactly one fenced code block, found 0/);
  assert.match(problemOf(codeContract, '```py\na\n```\n\n```py\nb\n```'), /found 2 block/);
  assert.match(problemOf(codeContract, 'Here is the code:\n```py\na\n```'), /outside the fenced code block/);
  assert.match(problemOf(codeContract, '```py\na\n```\nHope this helps!'), /outside the fenced code block/);
  assert.match(problemOf(codeContract, "I'll decompose this into subtasks."), /found 0/);
});

test('critic: a JSON array of {line: int, issue: str, severity: str}', () => {
  assert.deepEqual(accepts(critiqueContract, '[{"line": 3, "issue": "off by one", "severity": "high"}]'), [
    { line: 3, issue: 'off by one', severity: 'high' },
  ]);
  accepts(critiqueContract, '[]');
  accepts(critiqueContract, '```json\n[{"line": 1, "issue": "x", "severity": "low"}]\n```');
  assert.match(problemOf(critiqueContract, 'The code looks fine.'), /not valid JSON/);
  assert.match(
    problemOf(critiqueContract, '{"line": 1, "issue": "x", "severity": "low"}'),
    /critique does not match its schema/,
  );
  assert.match(problemOf(critiqueContract, '[{"line": 1.5, "issue": "x", "severity": "low"}]'), /0\.line/);
  assert.match(problemOf(critiqueContract, '[{"line": "3", "issue": "x", "severity": "low"}]'), /0\.line/);
  assert.match(problemOf(critiqueContract, '[{"line": 3, "issue": "x"}]'), /0\.severity/);
  assert.match(problemOf(critiqueContract, '[{"line": 3, "severity": "low"}]'), /0\.issue/);
});

test('planner: unknown role, more than 5 subtasks, duplicate artifacts, bad JSON, missing read_files', () => {
  const c = planContract(ROLES, ['solution.py']);
  const plan = (subtasks: unknown[]) => JSON.stringify({ subtasks });
  accepts(c, plan([sub('research-specialist', 'r.md'), sub('critic', 'c.json', ['solution.py'])]));
  assert.match(
    problemOf(c, plan([sub('boss', 'a.md')])),
    /unknown role "boss" \(known: research-specialist, code-writer, critic\)/,
  );
  assert.match(problemOf(c, plan(Array.from({ length: 6 }, (_, i) => sub('critic', `c${i}.json`)))), /1 to 5 subtasks/);
  assert.match(problemOf(c, plan([])), /1 to 5 subtasks/);
  assert.match(
    problemOf(c, plan([sub('critic', 'a.md'), sub('code-writer', 'a.md')])),
    /duplicate artifact name "a\.md"/,
  );
  assert.match(problemOf(c, '{"subtasks": [ oops'), /not valid JSON/);
  assert.match(problemOf(c, 'Sure! Here is my plan: first research, then code.'), /not valid JSON/);
  assert.match(
    problemOf(c, plan([sub('critic', 'c.json', ['ghost.md'])])),
    /read_files names "ghost\.md", which does not exist/,
  );
  assert.match(problemOf(c, plan([sub('critic', '../escape.md')])), /contains "\.\."/);
});

test('reflection: {decision: continue|replan|end|escalate, reason}', () => {
  for (const d of ['continue', 'replan', 'end', 'escalate'])
    accepts(reflectionContract, JSON.stringify({ decision: d, reason: 'r' }));
  assert.match(problemOf(reflectionContract, JSON.stringify({ decision: 'stop', reason: 'r' })), /decision/);
  assert.match(problemOf(reflectionContract, JSON.stringify({ decision: 'end' })), /reason/);
  assert.match(problemOf(reflectionContract, 'We are done.'), /not valid JSON/);
});

/** Runs one agent against scripted replies (in order) and returns its run and requests. */
async function runScripted(
  spec: AgentSpec,
  contract: OutputContract,
  replies: MessageReply[],
  role = 'x',
  task = 'the task',
) {
  const from = server.requests.length;
  let n = 0;
  server.setHandler(() => replies[Math.min(n++, replies.length - 1)]!);
  const agent = createAgent(spec, { provider: rt.provider, logger: rt.logger, models: rt.cfg.models });
  const run = await agent.run({ task, contract, ctx: ctxFor(role) });
  return { run, reqs: server.requests.slice(from) };
}

function lastMessageText(r: RecordedRequest): string {
  const m = r.body.messages[r.body.messages.length - 1]!;
  assert.equal(m.role, 'user');
  return blockText(m.content);
}

const role = (name: string) => rt.cfg.roles.find((r) => r.name === name)!;

test('a rejected answer is retried once, and the reminder naming the problem reaches the model', async () => {
  const cases: { spec: AgentSpec; contract: OutputContract; bad: string; good: string; problem: RegExp }[] = [
    {
      spec: role('research-specialist'),
      contract: summaryContract,
      bad: ' \n ',
      good: 'A fact [1].',
      problem: /the summary is empty/,
    },
    {
      spec: role('code-writer'),
      contract: codeContract,
      bad: "I'll decompose this into subtasks.",
      good: '```py\nx = 1\n```',
      problem: /expected exactly one fenced code block, found 0 block\(s\)/,
    },
    {
      spec: role('critic'),
      contract: critiqueContract,
      bad: '[{"line": "three", "issue": "x", "severity": "low"}]',
      good: '[]',
      problem: /critique does not match its schema: 0\.line/,
    },
    {
      spec: plannerSpec(rt.cfg),
      contract: planContract(roleNames(rt.cfg), []),
      bad: JSON.stringify({ subtasks: [sub('boss', 'a.md')] }),
      good: JSON.stringify({ subtasks: [sub('critic', 'a.md')] }),
      problem: /unknown role "boss"/,
    },
    {
      spec: reflectorSpec(rt.cfg),
      contract: reflectionContract,
      bad: 'Looks done to me.',
      good: '{"decision": "end", "reason": "done"}',
      problem: /output is not valid JSON/,
    },
  ];
  for (const c of cases) {
    const { run, reqs } = await runScripted(c.spec, c.contract, [text(c.bad), text(c.good)]);
    assert.equal(run.ok, true, `${c.contract.name}: ${run.problem}`);
    assert.equal(run.contractRetries, 1);
    assert.equal(reqs.length, 2, `${c.contract.name}: exactly one retry`);
    const second = reqs[1]!.body.messages;
    assert.deepEqual(second[0], reqs[0]!.body.messages[0], 'the retry continues the same conversation');
    const reminder = lastMessageText(reqs[1]!);
    assert.match(reminder, /^Your answer was rejected: /);
    assert.match(reminder, c.problem, `${c.contract.name}: the reminder names the problem`);
    assert.ok(reminder.includes(c.contract.describe), `${c.contract.name}: the reminder restates the contract`);
  }
});

test('a second failure gives up with the reason (no third attempt)', async () => {
  const { run, reqs } = await runScripted(role('code-writer'), codeContract, [
    text('Here you go: x = 1'),
    text('Sorry, x = 1'),
  ]);
  assert.equal(run.ok, false);
  assert.equal(reqs.length, 2);
  assert.match(
    run.problem!,
    /^output broke the code contract twice: expected exactly one fenced code block, found 0 block/,
  );
  assert.equal(run.text, 'Sorry, x = 1');
});

test('an empty answer is retried with a reminder (the retry request is one the API accepts)', async () => {
  for (const empty of [[], [{ type: 'text' as const, text: '' }], [{ type: 'text' as const, text: '  \n' }]]) {
    const { run, reqs } = await runScripted(role('research-specialist'), summaryContract, [
      { content: empty, stop_reason: 'end_turn' },
      text('Now a summary [1].'),
    ]);
    assert.equal(
      reqs[1]!.response?.kind,
      'message',
      `retry after ${JSON.stringify(empty)} was rejected: ${JSON.stringify(reqs[1]!.response?.body)}`,
    );
    assert.equal(run.ok, true, run.problem);
    assert.match(lastMessageText(reqs[1]!), /the summary is empty/);
  }
});

test('an answer cut off mid tool call (max_tokens) is retried with a request the API accepts', async () => {
  const cut: MessageReply = { ...toolUse('list_files', {}, { text: 'Let me look first' }), stop_reason: 'max_tokens' };
  const { run, reqs } = await runScripted(role('code-writer'), codeContract, [cut, text('```py\nx = 1\n```')]);
  assert.equal(reqs[1]!.response?.kind, 'message', `retry was rejected: ${JSON.stringify(reqs[1]!.response?.body)}`);
  assert.equal(run.ok, true, run.problem);
  assert.match(lastMessageText(reqs[1]!), /cut off at the role's maxTokens \(\d+ output tokens\)/);
});

test("an answer cut off at the role's maxTokens is no answer: retried, then failed naming the limit", async () => {
  const spec = role('research-specialist');
  const cut: MessageReply = {
    ...text('Summary: the first half of the background is that the algo'),
    stop_reason: 'max_tokens',
  };
  // A text contract would accept the cut summary whole: the stop reason decides, not the text.
  const retried = await runScripted(spec, summaryContract, [cut, text('A short summary [1].')]);
  assert.equal(retried.run.ok, true, retried.run.problem);
  assert.equal(retried.run.text, 'A short summary [1].');
  const reminder = lastMessageText(retried.reqs[1]!);
  assert.match(
    reminder,
    new RegExp(
      `^Your answer was rejected: the answer was cut off at the role's maxTokens \\(${spec.maxTokens} output tokens\\)`,
    ),
  );
  const twice = await runScripted(spec, summaryContract, [cut, cut]);
  assert.equal(twice.run.ok, false);
  assert.equal(twice.reqs.length, 2);
  assert.equal(
    twice.run.problem,
    `the answer was cut off at the role's maxTokens (${spec.maxTokens} output tokens), on the retry too`,
  );
  assert.match(twice.run.text, /the algo$/, 'the cut text is what the run has (stored failed, not done)');
});

test('a refusal is no answer: retried once, then failed saying the model declined', async () => {
  const refusal: MessageReply = { ...text('I cannot help with that.'), stop_reason: 'refusal' };
  const { run, reqs } = await runScripted(role('research-specialist'), summaryContract, [refusal, refusal]);
  assert.equal(run.ok, false);
  assert.equal(reqs.length, 2);
  assert.equal(
    run.problem,
    'the model declined to answer (stop reason refusal): I cannot help with that., on the retry too',
  );
});

// ---- through real service processes ----------------------------------------------------

test(
  'through the services: a subtask failing twice is failed with the reason, the reflector sees it; ' +
    'a planner failing twice fails the goal',
  async (t) => {
    const badPlan = JSON.stringify({ subtasks: [sub('boss', 'a.md')] });
    const tooBig = JSON.stringify({
      subtasks: Array.from({ length: 6 }, (_, i) => sub('research-specialist', `r${i}.md`)),
    });
    server.setHandler((body, i, rec) => {
      const task = firstUserText(body);
      const r = roleOf(body);
      if (task.includes('MARKCODEFAILS')) {
        if (r === 'code') return text("I'll decompose this into subtasks: first research, then code.");
        if (r === 'reflector') return text(JSON.stringify({ decision: 'end', reason: 'stop after one cycle' }));
      }
      if (task.includes('MARKPLANFAILS') && r === 'planner') return text(badPlan);
      if (task.includes('MARKPLANRETRY') && r === 'planner' && body.messages.length === 1) return text(tooBig);
      return defaultHandler(body, i, rec);
    });
    // Stopped by the test itself: root after() hooks run in order, and Redis stops first.
    const fleet: Fleet = await startFleet(redis.url, anthropicEnv(server));
    t.after(() => fleet.stop());
    const c = fleet.client;
    const [codeFails, planFails, planRetry] = await Promise.all([
      c.enqueue({ goal: 'Sort numbers MARKCODEFAILS' }),
      c.enqueue({ goal: 'Sort numbers MARKPLANFAILS' }),
      c.enqueue({ goal: 'Sort numbers MARKPLANRETRY' }),
    ]);
    const [g1, g2, g3] = await Promise.all(
      [codeFails, planFails, planRetry].map((id) => c.waitFor(id, { timeoutMs: 60_000 })),
    );
    const reqsOf = (marker: string) => server.requests.filter((r) => r.rawBody.includes(marker));

    // 1. The code-writer broke its contract twice: its subtask failed with the reason.
    assert.equal(g1!.status, 'done');
    const codeReqs = reqsOf('MARKCODEFAILS').filter((r) => roleOf(r.body) === 'code');
    assert.equal(codeReqs.length, 2, 'one answer, one retry');
    assert.match(
      lastMessageText(codeReqs[1]!),
      /^Your answer was rejected: expected exactly one fenced code block, found 0 block\(s\)/,
    );
    const events = (await c.goals.events(codeFails)).map((e) => e.event);
    const failed = events.find((e) => e.type === 'subtask_failed');
    assert.ok(failed?.type === 'subtask_failed', 'a subtask_failed event');
    assert.equal(failed.artifact, 'solution.py');
    assert.match(
      String(failed.reason),
      /^output broke the code contract twice: expected exactly one fenced code block/,
    );
    assert.ok(
      events.some((e) => e.type === 'subtask_finished' && e.artifact === 'research.md'),
      'the sibling subtask was not affected',
    );
    assert.equal((await c.vfs.stat(codeFails, 'solution.py'))?.status, 'failed');
    const refl = reqsOf('MARKCODEFAILS').filter((r) => roleOf(r.body) === 'reflector');
    assert.equal(refl.length, 1);
    const seen = firstUserText(refl[0]!.body);
    const codeFailedLine = new RegExp(
      String.raw`^- solution\.py \(code-writer\): failed: ` +
        'output broke the code contract twice: expected exactly one fenced code block',
      'm',
    );
    assert.match(seen, codeFailedLine);
    assert.match(seen, /^- research\.md \(research-specialist\): done$/m);

    // 2. The planner broke its contract twice: the goal failed with the reason, nothing ran.
    assert.equal(g2!.status, 'failed');
    assert.match(g2!.reason!, /^planner output rejected: output broke the plan contract twice: .*unknown role "boss"/);
    const planReqs = reqsOf('MARKPLANFAILS');
    assert.deepEqual(
      planReqs.map((r) => roleOf(r.body)),
      ['planner', 'planner'],
    );
    assert.match(lastMessageText(planReqs[1]!), /^Your answer was rejected: .*unknown role "boss"/);

    // 3. A planner that breaks its contract once is reminded and goes on.
    assert.equal(g3!.status, 'done');
    const retryReqs = reqsOf('MARKPLANRETRY').filter((r) => roleOf(r.body) === 'planner');
    assert.equal(retryReqs.length, 4, 'two cycles, each planned after one reminder');
    for (const r of [retryReqs[1]!, retryReqs[3]!]) assert.match(lastMessageText(r), /a plan needs 1 to 5 subtasks/);
  },
);
