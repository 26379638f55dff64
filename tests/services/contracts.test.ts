// The zod contracts at every boundary: valid shapes pass, invalid ones fail naming the field.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GoalRequestSchema } from '../../cli/goal-request.ts';
import { planRuleIssues, planSchemaFor } from '../../services/planner/plan-contract.ts';
import { ValidationError } from '../../shared/errors.ts';
import { ReflectionSchema } from '../../shared/goal/plan.ts';
import {
  PlanJobSchema,
  ReflectJobSchema,
  SubagentJobResultSchema,
  SubagentJobSchema,
  SubagentResultSchema,
} from '../../shared/runtime/jobs.ts';
import { extractJson, parseOrThrow } from '../../shared/zod.ts';

const roles = ['research-specialist', 'code-writer', 'critic'];
const task = (over: Record<string, unknown> = {}) => ({
  role: 'critic',
  instruction: 'review',
  expected_artifact: 'c.json',
  read_files: [],
  ...over,
});

test('a plan in the seed shape with 1-5 subtasks, known roles, unique names and existing read_files passes', () => {
  const plan = {
    subtasks: [task(), task({ role: 'code-writer', expected_artifact: 'a.py', read_files: ['spec.md'] })],
  };
  const parsed = planSchemaFor(roles, ['spec.md']).parse(plan);
  assert.equal(parsed.subtasks.length, 2);
  assert.deepEqual(parsed.subtasks[1]!.read_files, ['spec.md']);
});

test('a planned name may be neither the folder of an existing file nor a file where one has its folder', () => {
  const against = (name: string) =>
    planRuleIssues({ subtasks: [task({ expected_artifact: name })] }, roles, ['docs/a.md', 'b.md']);
  assert.match(against('docs')[0]?.message ?? '', /"docs" cannot be both a file and the folder of "docs\/a\.md"/);
  assert.match(
    against('b.md/c.md')[0]?.message ?? '',
    /"b\.md" cannot be both a file and the folder of "b\.md\/c\.md"/,
  );
  assert.deepEqual(against('docs2/a.md'), []);
  assert.deepEqual(against('doc'), []);
});

test('read_files defaults to an empty list', () => {
  const { read_files: _omit, ...bare } = task();
  assert.deepEqual(planSchemaFor(roles, []).parse({ subtasks: [bare] }).subtasks[0]!.read_files, []);
});

test('plans that break a rule fail with a message naming the rule', () => {
  const cases: [unknown, RegExp][] = [
    [{ subtasks: [] }, /1 to 5 subtasks/],
    [{ subtasks: Array.from({ length: 6 }, (_, i) => task({ expected_artifact: `f${i}` })) }, /1 to 5 subtasks/],
    [{ subtasks: [task({ role: 'planner' })] }, /subtasks\.0\.role: unknown role "planner"/],
    [{ subtasks: [task(), task()] }, /subtasks\.1\.expected_artifact: duplicate artifact name "c\.json"/],
    [{ subtasks: [task({ read_files: ['missing.md'] })] }, /read_files names "missing\.md", which does not exist/],
    [{ subtasks: [task({ instruction: '' })] }, /instruction is empty/],
    // A file and a folder of one name: no export can write both.
    [
      { subtasks: [task({ expected_artifact: 'report' }), task({ expected_artifact: 'report/summary.md' })] },
      /subtasks\.1\.expected_artifact: "report" cannot be both a file and the folder of "report\/summary\.md"/,
    ],
    [{ subtasks: [task({ expected_artifact: '../x' })] }, /contains "\.\."/],
    [{ tasks: [task()] }, /subtasks/],
  ];
  for (const [plan, re] of cases) {
    assert.throws(
      () => parseOrThrow(planSchemaFor(roles, []), plan, 'plan'),
      (e: Error) => e instanceof ValidationError && re.test(e.message),
      JSON.stringify(plan).slice(0, 80),
    );
  }
});

test('the reflection is a decision from the four and a reason', () => {
  for (const decision of ['continue', 'replan', 'end', 'escalate'])
    assert.equal(ReflectionSchema.parse({ decision, reason: 'r' }).decision, decision);
  assert.throws(() => parseOrThrow(ReflectionSchema, { decision: 'stop', reason: 'r' }, 'reflection'), /decision/);
  assert.throws(() => parseOrThrow(ReflectionSchema, { decision: 'end' }, 'reflection'), /reason/);
  // A long reason is cut, not refused: refused, a right `end` was retried, and twice failed the goal.
  const long = ReflectionSchema.parse({ decision: 'end', reason: 'r'.repeat(5000) });
  assert.equal(long.decision, 'end');
  assert.equal(long.reason, `${'r'.repeat(1999)}…`);
});

test('SubagentResult follows the seed: notes at most 200 chars, status one of three', () => {
  const ok = SubagentResultSchema.parse({ artifact_name: 'a.md', content: 'x' });
  assert.equal(ok.status, 'active');
  assert.equal(ok.notes, null);
  assert.throws(
    () => parseOrThrow(SubagentResultSchema, { artifact_name: 'a.md', content: 'x', notes: 'n'.repeat(201) }, 'result'),
    /notes/,
  );
  assert.throws(
    () => parseOrThrow(SubagentResultSchema, { artifact_name: 'a.md', content: 'x', status: 'weird' }, 'result'),
    /status/,
  );
});

test("the job's return value is the SubagentResult without content", () => {
  const r = SubagentJobResultSchema.parse({
    artifact_name: 'a.md',
    status: 'done',
    notes: null,
    role: 'critic',
    threadId: 't',
    bytes: 3,
    startedAt: 1,
    finishedAt: 2,
    content: 'dropped',
  });
  assert.equal('content' in r, false);
});

test('the goal request rejects empty, huge and binary text', () => {
  assert.equal(GoalRequestSchema.parse({ goal: 'do it' }).review, false);
  assert.throws(() => parseOrThrow(GoalRequestSchema, { goal: '   ' }, 'goal request'), /goal text is empty/);
  assert.throws(
    () => parseOrThrow(GoalRequestSchema, { goal: 'x'.repeat(100 * 1024 + 1) }, 'goal request'),
    /over 100 KB/,
  );
  assert.throws(() => parseOrThrow(GoalRequestSchema, { goal: 'abc\u0000\u0001def' }, 'goal request'), /binary/);
  assert.throws(
    () => parseOrThrow(GoalRequestSchema, { goal: 'ok', budgets: { maxTokens: -1 } }, 'goal request'),
    /budgets\.maxTokens/,
  );
});

test('every job payload is validated, naming the bad field', () => {
  assert.deepEqual(PlanJobSchema.parse({ goalId: 'abcdef123456', step: 1 }), { goalId: 'abcdef123456', step: 1 });
  assert.throws(() => parseOrThrow(PlanJobSchema, { goalId: 'ABC', step: 1 }, 'plan job'), /goalId/);
  assert.throws(() => parseOrThrow(ReflectJobSchema, { goalId: 'abcdef123456', step: 0 }, 'reflect job'), /step/);
  const sub = {
    goalId: 'abcdef123456',
    step: 1,
    index: 0,
    role: 'critic',
    instruction: 'x',
    expected_artifact: 'a.md',
  };
  assert.deepEqual(SubagentJobSchema.parse(sub).read_files, []);
  assert.throws(() => parseOrThrow(SubagentJobSchema, { ...sub, index: 5 }, 'subagent job'), /index/);
  assert.throws(
    () => parseOrThrow(SubagentJobSchema, { ...sub, expected_artifact: '/etc/passwd' }, 'subagent job'),
    /expected_artifact/,
  );
  assert.throws(() => parseOrThrow(SubagentJobSchema, 'not an object', 'subagent job'), /invalid subagent job/);
});

test('model JSON may be bare or in one fenced block; anything else is named invalid JSON', () => {
  assert.deepEqual(extractJson('{"a":1}'), { a: 1 });
  assert.deepEqual(extractJson('```json\n{"a":1}\n```'), { a: 1 });
  // Whatever the fence's tag (models write JSON, jsonc, or none): it was refused as "Unexpected token".
  for (const tag of ['JSON', 'jsonc', '', 'Json '])
    assert.deepEqual(extractJson(`\`\`\`${tag}\n{"a":1}\n\`\`\``), { a: 1 });
  assert.throws(() => extractJson('Here is the plan: {"a":1}'), /not valid JSON/);
});

test('model JSON nested thousands deep with an escape in it parses (the reviver overflowed the stack)', () => {
  const deep = `${'{"x":'.repeat(5000)}"\\ud83d"${'}'.repeat(5000)}`;
  let v = extractJson(`{"subtasks":[],"extra":${deep}}`) as Record<string, unknown>;
  v = v.extra as Record<string, unknown>;
  for (let i = 0; i < 4999; i++) v = v.x as Record<string, unknown>;
  assert.equal(v.x, '\uFFFD');
});

test('model JSON hands on no half of an emoji: an escaped lone surrogate, or one quoted by the parse error', () => {
  assert.deepEqual(extractJson('{"instruction":"look \\ud83d here","ok":"\\ud83d\\udd0d"}'), {
    instruction: 'look \uFFFD here',
    ok: '🔍',
  });
  assert.throws(
    () => extractJson('🔍 Looks fine'),
    (err: Error) => /not valid JSON/.test(err.message) && err.message.isWellFormed(),
  );
});
