// P52 on the OpenAI provider: every agent (planner, reflector, each role) runs on an
// OpenAI-compatible endpoint through real service processes and the real `openai` SDK.
// Every Chat Completions request is captured and, as tests/agent/p52-isolation does for
// Anthropic, we check on the wire:
//  1. the system message is exactly the agent's own prompt, and the only one;
//  2. the first user message is the instruction the planner gave plus the contents of the
//     read_files it named, and nothing more;
//  3. no planner or reflector text, and no other goal, is in a subagent's request;
//  4. later requests of a conversation only extend that conversation.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { plannerPrompt } from '../../services/planner/prompt.ts';
import { REFLECTOR_PROMPT } from '../../services/reflector/prompt.ts';
import { artifactOfAnswer, contractFor } from '../../shared/agent/output-contracts.ts';
import type { RoleContract } from '../../shared/agent/roles.ts';
import type { Plan } from '../../shared/goal/plan.ts';
import {
  type ChatCompletionsServer,
  type ChatRecordedRequest,
  chatTask,
  defaultChatHandler,
  FAKE_OPENAI_KEY,
  linkChatThreads,
  messagesView,
  say,
  startChatCompletionsServer,
} from '../../testing/chat-completions-server.ts';
import { type Fleet, startFleet } from '../../testing/fleet.ts';
import { roleOf } from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import { writeConfig } from './harness.ts';

const redis = useRedis();
let server: ChatCompletionsServer;
let fleet: Fleet;

before(async () => {
  await redis.ready;
  // The default model, except that the reflector asks for three cycles: research + code,
  // a critique that reads solution.py, a revision that reads solution.py and critique.json.
  server = await startChatCompletionsServer({
    handler: (body, i, rec) => {
      if (roleOf(messagesView(body)) !== 'reflector') return defaultChatHandler(body, i, rec);
      const cycle = Number(/^Cycle: (\d+)$/m.exec(chatTask(body))?.[1]);
      if (cycle >= 3) return say(JSON.stringify({ decision: 'end', reason: 'revised after review' }));
      // After the critique, finished code may be planned again only when the reflection says so.
      const revise = cycle === 2 ? { revise: ['solution.py'] } : {};
      return say(JSON.stringify({ decision: 'continue', reason: `cycle ${cycle} done`, ...revise }));
    },
  });
  const config = writeConfig({
    providers: { local: server.providerConfig() },
    models: { HIGH: 'local:chat-high', LOW: 'local:chat-low' },
  });
  // No model is on anthropic and no key is set: the configured providers, as a user would run it.
  fleet = await startFleet(redis.url, { ...server.env(), DEEPQ_CONFIG: config, DEEPQ_MODEL_PROVIDER: '' });
});
after(async () => {
  await fleet?.stop();
  await server?.close();
});

const GOALS = ['Write a function that sorts numbers GOALALPHA', 'Write a function that reverses a string GOALBRAVO'];
const roleOfReq = (r: ChatRecordedRequest) => roleOf(messagesView(r.body));
const isCoordinator = (r: ChatRecordedRequest) => ['planner', 'reflector'].includes(roleOfReq(r));

/** A conversation's final text: its last answer's content. */
function finalText(thread: ChatRecordedRequest[]): string {
  const last = thread[thread.length - 1]!.response!.body as { choices: { message: { content: string | null } }[] };
  return last.choices[0]!.message.content ?? '';
}

interface Expected {
  goal: number;
  cycle: number;
  role: string;
  task: string;
}

/** What each subagent must have been given: the plans returned, with the read_files as written. */
function expectedTasks(threads: ChatRecordedRequest[][], contracts: Map<string, RoleContract>): Expected[] {
  const goalOf = (r: ChatRecordedRequest) => GOALS.findIndex((g) => r.rawBody.includes(g.split(' ').pop()!));
  const subThreads = threads.filter((th) => !isCoordinator(th[0]!));
  const expected: Expected[] = [];
  const written = new Map<string, string>(); // `${goal}|${artifact}` → content (latest)
  for (const g of [0, 1]) {
    for (let cycle = 1; cycle <= 3; cycle++) {
      const planner = threads.find(
        (th) =>
          roleOfReq(th[0]!) === 'planner' &&
          goalOf(th[0]!) === g &&
          chatTask(th[0]!.body).includes(`\nCycle: ${cycle}\n`),
      );
      assert.ok(planner, `planner request for goal ${g} cycle ${cycle}`);
      const plan = JSON.parse(finalText(planner)) as Plan;
      const tasks = plan.subtasks.map((s) => {
        const parts = s.read_files.map((f) => `# ${f}\n${written.get(`${g}|${f}`)}`);
        const task = parts.length ? `${parts.join('\n\n')}\n\n## Task\n${s.instruction}` : s.instruction;
        return { goal: g, cycle, role: s.role, task, artifact: s.expected_artifact };
      });
      for (const tk of tasks) {
        const th = subThreads.find((x) => chatTask(x[0]!.body) === tk.task);
        assert.ok(
          th,
          `a conversation for ${tk.role} → ${tk.artifact} (goal ${g}, cycle ${cycle}) that starts with its task`,
        );
        // The artifact is the answer as stored (a code block as the code it holds).
        written.set(`${g}|${tk.artifact}`, artifactOfAnswer(contractFor(contracts.get(tk.role)!), finalText(th)));
      }
      expected.push(...tasks);
    }
  }
  assert.equal(subThreads.length, expected.length, 'one conversation per subtask, no more');
  return expected;
}

test('on the OpenAI provider, every agent sends only its own prompt and its own fresh conversation', async () => {
  const ids = await Promise.all(GOALS.map((goal) => fleet.client.enqueue({ goal })));
  const finals = await Promise.all(ids.map((id) => fleet.client.waitFor(id, { timeoutMs: 60_000 })));
  for (const g of finals) {
    assert.equal(g.status, 'done', `goal ${g.goalId} ended ${g.status}: ${g.reason}`);
    assert.equal(g.step, 3);
  }
  const reqs = server.requests;
  assert.ok(
    reqs.length > 0 && reqs.every((r) => r.response?.kind === 'completion'),
    'every request valid and answered',
  );
  assert.ok(reqs.every((r) => r.apiKey === FAKE_OPENAI_KEY));
  const roles = new Map(fleet.cfg.roles.map((r) => [r.name, r]));
  const planner = plannerPrompt(fleet.cfg.roles.map((r) => r.name));
  const prompts = [planner, REFLECTOR_PROMPT, ...fleet.cfg.roles.map((r) => r.systemPrompt)];

  // 1 for the planner and the reflector: their own prompt, then their task.
  for (const r of reqs.filter(isCoordinator)) {
    const [system, user, ...rest] = r.body.messages;
    assert.deepEqual(system, { role: 'system', content: roleOfReq(r) === 'planner' ? planner : REFLECTOR_PROMPT });
    assert.equal(user?.role, 'user');
    assert.deepEqual(rest, [], 'one turn, no tools');
  }
  const { threads, problems } = linkChatThreads(reqs);
  assert.deepEqual(
    problems.map((p) => `#${p.req.index}: ${p.problem}`),
    [],
    'every request extends only its own conversation',
  );
  const expected = expectedTasks(threads, new Map(fleet.cfg.roles.map((r) => [r.name, r.contract])));
  assert.ok(
    expected.some((e) => e.task.includes('# critique.json\n')),
    'the run covered read_files',
  );

  let checked = 0;
  for (const th of threads.filter((x) => !isCoordinator(x[0]!))) {
    const exp = expected.find((e) => e.task === chatTask(th[0]!.body))!;
    const spec = roles.get(exp.role)!;
    const others = GOALS.filter((_, i) => i !== exp.goal).map((g) => g.split(' ').pop()!);
    assert.ok(th.length >= 2, 'each subagent made a tool call, so its conversation has several requests');
    for (const r of th) {
      checked++;
      const where = `request #${r.index} (${exp.role}, goal ${exp.goal}, cycle ${exp.cycle})`;
      const [system, first, ...rest] = r.body.messages;
      // 1 and 2: the role's prompt alone, then its task alone; the rest is its own turns.
      assert.deepEqual(system, { role: 'system', content: spec.systemPrompt }, where);
      assert.deepEqual(first, { role: 'user', content: exp.task }, where);
      assert.ok(
        rest.every((m) => m.role === 'assistant' || m.role === 'tool'),
        `${where}: only its own turns`,
      );
      assert.deepEqual(
        r.body.tools!.map((t) => t.function.name),
        spec.tools,
        where,
      );
      // 3: no planner or reflector text, no other role's prompt, no other goal.
      const body = JSON.stringify(r.body.messages.slice(1));
      for (const p of prompts) assert.ok(!body.includes(p.slice(0, 40)), `${where}: a system prompt leaked`);
      const markers = ['You are the planner', 'You are the reflection node', 'Prior plan:', 'Last reflection:'];
      for (const marker of [...markers, 'Current files:', '"subtasks"', '"decision"', ...others])
        assert.ok(!r.rawBody.includes(marker), `${where}: ${JSON.stringify(marker)} reached a subagent`);
    }
  }
  assert.ok(checked >= 16, `checked ${checked} subagent requests`);
});
