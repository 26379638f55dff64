// P52 (seed 000): a subagent never inherits the planner's persona or anyone's history.
// Whole multi-cycle goals run through real service processes and the real SDK against a
// local Messages-API server; every HTTP request is captured and, for every subagent
// request, we check:
//  1. the system prompt is exactly the role's prompt and nothing else;
//  2. messages[0] is one user message: the instruction the planner gave, plus the contents
//     of the read_files it named, and nothing more;
//  3. no planner or reflector text, and no other agent's turn, is in it;
//  4. later requests of a thread only extend that thread's own messages.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { plannerPrompt } from '../../services/planner/prompt.ts';
import { REFLECTOR_PROMPT } from '../../services/reflector/prompt.ts';
import { artifactOfAnswer, contractFor } from '../../shared/agent/output-contracts.ts';
import type { Plan } from '../../shared/goal/plan.ts';
import { anthropicEnv } from '../../testing/agent-harness.ts';
import { type Fleet, startFleet } from '../../testing/fleet.ts';
import {
  defaultHandler,
  FAKE_API_KEY,
  firstUserText,
  linkThreads,
  type MessagesApiServer,
  type RecordedRequest,
  roleOf,
  startMessagesApiServer,
  text,
  unmarkedMessages,
  type WireTextBlock,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
let server: MessagesApiServer;

before(async () => {
  await redis.ready;
  // The default model, except that the reflector asks for three cycles: research + code,
  // a critique that reads solution.py, a revision (asked for by the reflection: solution.py
  // is done) that reads solution.py and critique.json.
  server = await startMessagesApiServer({
    handler: (body, i, rec) => {
      if (roleOf(body) === 'reflector') {
        const cycle = Number(/^Cycle: (\d+)$/m.exec(firstUserText(body))?.[1]);
        const revise = cycle === 2 ? { revise: ['solution.py'] } : {};
        return text(
          JSON.stringify(
            cycle >= 3
              ? { decision: 'end', reason: 'revised after review' }
              : { decision: 'continue', reason: `cycle ${cycle} done`, ...revise },
          ),
        );
      }
      return defaultHandler(body, i, rec);
    },
  });
});
after(async () => {
  await server?.close();
});

const GOALS = ['Write a function that sorts numbers GOALALPHA', 'Write a function that reverses a string GOALBRAVO'];

test('every subagent request carries only its role prompt and its own fresh conversation', async (t) => {
  const fleet: Fleet = await startFleet(redis.url, anthropicEnv(server));
  t.after(() => fleet.stop());
  const ids = await Promise.all(GOALS.map((goal) => fleet.client.enqueue({ goal })));
  const finals = await Promise.all(ids.map((id) => fleet.client.waitFor(id, { timeoutMs: 60_000 })));
  for (const g of finals) {
    assert.equal(g.status, 'done', `goal ${g.goalId} ended ${g.status}: ${g.reason}`);
    assert.equal(g.step, 3);
  }

  const cfg = fleet.cfg;
  const roles = new Map(cfg.roles.map((r) => [r.name, r]));
  const planner = plannerPrompt(cfg.roles.map((r) => r.name));
  const prompts = [planner, REFLECTOR_PROMPT, ...cfg.roles.map((r) => r.systemPrompt)];
  const reqs = server.requests;
  assert.ok(
    reqs.every((r) => r.response?.kind === 'message'),
    'every request was valid and answered',
  );
  for (const r of reqs) {
    assert.equal(r.apiKey, FAKE_API_KEY, 'the configured key is sent');
    assert.ok(r.headers['anthropic-version']);
  }

  // Planner and reflector requests also carry exactly their own prompt (contract 1).
  const sysOf = (r: RecordedRequest) => r.body.system as WireTextBlock[];
  for (const r of reqs.filter((x) => ['planner', 'reflector'].includes(roleOf(x.body)))) {
    assert.equal(sysOf(r).length, 1);
    assert.equal(sysOf(r)[0]!.text, roleOf(r.body) === 'planner' ? planner : REFLECTOR_PROMPT);
  }

  // What each subagent must have been given: the plans the planner returned, with the
  // contents of each read_file as the agent that wrote it answered.
  const goalOfReq = (r: RecordedRequest) => GOALS.findIndex((g) => r.rawBody.includes(g.split(' ').pop()!));
  const { threads, problems } = linkThreads(reqs);
  assert.deepEqual(
    problems.map((p) => `#${p.req.index}: ${p.problem}`),
    [],
    'every request extends only its own conversation',
  );
  const finalText = (th: RecordedRequest[]) => {
    const last = th[th.length - 1]!.response!.body as { content: WireTextBlock[] };
    return last.content
      .filter((b) => b.type === 'text')
      .map((b) => b.text)
      .join('');
  };
  const expected: { goal: number; cycle: number; role: string; task: string; artifact: string }[] = [];
  const written = new Map<string, string>(); // `${goal}|${artifact}` → content (latest)
  const subThreads = threads.filter((th) => !['planner', 'reflector'].includes(roleOf(th[0]!.body)));
  for (const g of [0, 1]) {
    for (let cycle = 1; cycle <= 3; cycle++) {
      const plannerThread = threads.find(
        (th) =>
          roleOf(th[0]!.body) === 'planner' &&
          goalOfReq(th[0]!) === g &&
          firstUserText(th[0]!.body).includes(`\nCycle: ${cycle}\n`),
      )!;
      assert.ok(plannerThread, `planner request for goal ${g} cycle ${cycle}`);
      const plan = JSON.parse(finalText(plannerThread)) as Plan;
      const tasks = plan.subtasks.map((s) => {
        const parts = s.read_files.map((f) => {
          const content = written.get(`${g}|${f}`);
          assert.ok(content !== undefined, `cycle ${cycle} reads ${f}, written earlier`);
          return `# ${f}\n${content}`;
        });
        return {
          goal: g,
          cycle,
          role: s.role,
          artifact: s.expected_artifact,
          task: parts.length ? `${parts.join('\n\n')}\n\n## Task\n${s.instruction}` : s.instruction,
        };
      });
      expected.push(...tasks);
      // After the cycle, each subtask's final answer is its artifact.
      for (const tk of tasks) {
        const th = subThreads.find((x) => firstUserText(x[0]!.body) === tk.task);
        assert.ok(
          th,
          `a conversation for ${tk.role} → ${tk.artifact} (goal ${g}, cycle ${cycle}) ` +
            'that starts with exactly its task',
        );
        // The artifact is the answer as stored (a code block as the code it holds).
        written.set(`${g}|${tk.artifact}`, artifactOfAnswer(contractFor(roles.get(tk.role)!.contract), finalText(th)));
      }
    }
  }
  assert.equal(subThreads.length, expected.length, 'one conversation per subtask, no more');
  assert.ok(
    expected.some((e) => e.role === 'critic') && expected.some((e) => e.task.includes('# critique.json\n')),
    'the run covered read_files',
  );

  let checked = 0;
  for (const th of subThreads) {
    const exp = expected.find((e) => e.task === firstUserText(th[0]!.body))!;
    const spec = roles.get(exp.role)!;
    const others = GOALS.filter((_, i) => i !== exp.goal).map((g) => g.split(' ').pop()!);
    assert.ok(th.length >= 2, 'each subagent made a tool call, so its thread has several requests');
    for (const r of th) {
      checked++;
      const where = `request #${r.index} (${exp.role}, goal ${exp.goal}, cycle ${exp.cycle})`;
      // 1. The system prompt is the role's prompt, alone.
      assert.deepEqual(
        r.body.system,
        [{ type: 'text', text: spec.systemPrompt, cache_control: { type: 'ephemeral' } }],
        where,
      );
      // 2. One user message with the task; the rest is this thread's own turns.
      const [first, ...rest] = unmarkedMessages(r.body.messages);
      assert.deepEqual(first, { role: 'user', content: exp.task }, where);
      for (const [i, m] of rest.entries())
        assert.equal(m.role, i % 2 === 0 ? 'assistant' : 'user', `${where}: turns alternate`);
      assert.deepEqual(
        r.body.tools!.map((x) => x.name),
        spec.tools,
        where,
      );
      // 3. No planner or reflector text, no other role's prompt, no other goal.
      const body = JSON.stringify(r.body.messages);
      for (const p of prompts)
        assert.ok(!body.includes(p.slice(0, 40)), `${where}: a system prompt leaked into the messages`);
      for (const marker of [
        'You are the planner',
        'You are the reflection node',
        'Prior plan:',
        'Last reflection:',
        'Current files:',
        '"subtasks"',
        '"decision"',
        ...others,
      ]) {
        assert.ok(!r.rawBody.includes(marker), `${where}: ${JSON.stringify(marker)} reached a subagent`);
      }
    }
  }
  assert.ok(checked >= 16, `checked ${checked} subagent requests`);
});
