// The `watch` tree a terminal shows: cycles, then each subtask with role, state, duration
// and bytes, the decision of each cycle, and the final status.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatEventLine, TimelineView } from '../../cli/timeline.ts';
import type { TimelineEvent } from '../../shared/goal/events.ts';

const t0 = 1_000_000;
const events: TimelineEvent[] = [
  { type: 'created', at: t0, goal: 'Sort numbers' },
  {
    type: 'planned',
    at: t0 + 100,
    step: 1,
    threadId: 'goal-tv0000000001--planner-0000abcd',
    subtasks: [
      { role: 'research-specialist', artifact: 'research.md' },
      { role: 'code-writer', artifact: 'solution.py' },
    ],
  },
  {
    type: 'dispatched',
    at: t0 + 110,
    step: 1,
    subtasks: [
      { index: 0, role: 'research-specialist', artifact: 'research.md' },
      { index: 1, role: 'code-writer', artifact: 'solution.py' },
    ],
  },
  {
    type: 'subtask_started',
    at: t0 + 120,
    step: 1,
    index: 0,
    role: 'research-specialist',
    artifact: 'research.md',
    threadId: 'goal-tv0000000001--research-specialist-0000abcd',
    attempt: 1,
  },
  {
    type: 'subtask_started',
    at: t0 + 125,
    step: 1,
    index: 1,
    role: 'code-writer',
    artifact: 'solution.py',
    threadId: 'goal-tv0000000001--code-writer-0000abcd',
    attempt: 1,
  },
  {
    type: 'subtask_finished',
    at: t0 + 420,
    step: 1,
    index: 0,
    role: 'research-specialist',
    artifact: 'research.md',
    bytes: 240,
    ms: 300,
  },
];

test('a running cycle shows each subtask with its state, and finished ones with duration and bytes', () => {
  const v = new TimelineView();
  for (const e of events) v.apply(e);
  const out = v.render();
  assert.match(out, /^goal: Sort numbers {2}\[running\]/);
  assert.match(out, /└─ cycle 1\n/);
  assert.match(out, /├─ \[0\] research-specialist\s+research\.md\s+done {2}\(0\.30s, 240 B\)/);
  assert.match(out, /└─ \[1\] code-writer\s+solution\.py\s+running/);
});

test('decisions, failures, evictions and the final status appear as the goal goes on', () => {
  const later: TimelineEvent[] = [
    {
      type: 'subtask_failed',
      at: t0 + 500,
      step: 1,
      index: 1,
      role: 'code-writer',
      artifact: 'solution.py',
      reason: 'output broke the code contract twice',
    },
    { type: 'evicted', at: t0 + 510, step: 1, name: 'old.md', reason: 'done_aged' },
    {
      type: 'reflected',
      at: t0 + 520,
      step: 1,
      decision: 'end',
      reason: 'good enough',
      outcomes: [
        { index: 0, status: 'done' },
        { index: 1, status: 'failed' },
      ],
    },
    { type: 'finished', at: t0 + 530, status: 'done', step: 1 },
  ];
  const v = new TimelineView();
  for (const e of [...events, ...later]) v.apply(e);
  const out = v.render();
  assert.match(out, /\[done\]/);
  assert.match(out, /cycle 1 {2}→ end \(good enough\) {2}\[1 evicted\]/);
  assert.match(out, /\[1\] code-writer\s+solution\.py\s+failed {2}\(output broke the code contract twice\)/);
});

test("a pause's reason goes with the resume: a goal that then ends done shows no reason", () => {
  const pausedAndDone: TimelineEvent[] = [
    { type: 'paused', at: t0 + 600, step: 1, pausedFor: 'budget', reason: 'time budget exceeded', budget: 'seconds' },
    { type: 'resumed', at: t0 + 700, step: 1, action: 'raise budget', budgets: { maxSeconds: 60 } },
  ];
  const v = new TimelineView();
  for (const e of [...events, ...pausedAndDone]) v.apply(e);
  assert.doesNotMatch(v.render(), /reason:/, 'a resumed goal still shows its pause reason');
  v.apply({ type: 'finished', at: t0 + 800, status: 'done', step: 1 });
  assert.match(v.render(), /\[done\]/);
  assert.doesNotMatch(v.render(), /reason:|time budget/);
});

/** Subtask 1's call waiting for a human. */
const approvalRequested = (tool: string, input: string): TimelineEvent => ({
  type: 'approval_requested',
  at: t0 + 450,
  step: 1,
  index: 1,
  role: 'code-writer',
  threadId: 'goal-tv0000000001--code-writer-0000abcd',
  callId: 'ap-1',
  tool,
  input,
  expiresAt: t0 + 60_000,
});

test('a goal ended mid-cycle stops its open subtasks: none shows running, no call still waits', () => {
  const waiting = approvalRequested('write_file', '{"name":"x"}');
  const v = new TimelineView();
  for (const e of [...events, waiting]) v.apply(e);
  assert.match(v.render(), /\[1\] code-writer\s+solution\.py\s+awaiting approval\n.*⏸ ap-1/);
  v.apply({ type: 'finished', at: t0 + 500, status: 'cancelled', reason: 'cancelled by user' });
  const out = v.render();
  assert.match(out, /\[0\] research-specialist\s+research\.md\s+done/);
  assert.match(out, /\[1\] code-writer\s+solution\.py\s+stopped \(cancelled\)/);
  assert.doesNotMatch(out, /⏸|running|awaiting/);
  // The call's own cancellation, written after the goal's end, changes nothing.
  v.apply({ ...waiting, type: 'approval_decided', at: t0 + 510, decision: 'cancelled' } as TimelineEvent);
  assert.equal(v.render(), out);
});

test('a budget pause parks the running subtasks until the resume; its hint names the goal', () => {
  const v = new TimelineView('f4b4845f60e5');
  const paused: TimelineEvent = {
    type: 'paused',
    at: t0 + 600,
    step: 1,
    pausedFor: 'budget',
    reason: 'token budget exceeded',
    budget: 'tokens',
  };
  for (const e of [...events, paused]) v.apply(e);
  assert.match(v.render(), /\[1\] code-writer\s+solution\.py\s+parked/);
  assert.match(v.render(), /reason: token budget exceeded \(raise it: deepq resume f4b4845f60e5 --max-tokens N\)/);
  assert.match(formatEventLine(paused, t0, 'f4b4845f60e5'), /deepq resume f4b4845f60e5 --max-tokens N/);
  v.apply({ type: 'resumed', at: t0 + 700, step: 1, action: 'raise budget', budgets: { maxTokens: 9000 } });
  assert.match(v.render(), /\[1\] code-writer\s+solution\.py\s+running/);
});

test('a call approved while the goal waits at its budget shows the subtask parked, then running once raised', () => {
  const v = new TimelineView('f4b4845f60e5');
  const waiting = approvalRequested('write_file', '{"name":"x"}');
  const paused: TimelineEvent = {
    type: 'paused',
    at: t0 + 600,
    step: 1,
    pausedFor: 'budget',
    reason: 'r',
    budget: 'seconds',
  };
  for (const e of [...events, waiting, paused]) v.apply(e);
  assert.match(v.render(), /\[1\] code-writer\s+solution\.py\s+awaiting approval/);
  v.apply({ ...waiting, type: 'approval_decided', at: t0 + 650, decision: 'approved' } as TimelineEvent);
  assert.match(v.render(), /\[1\] code-writer\s+solution\.py\s+parked/);
  v.apply({ type: 'resumed', at: t0 + 700, step: 1, action: 'raise budget', budgets: { maxSeconds: 60 } });
  assert.match(v.render(), /\[1\] code-writer\s+solution\.py\s+running/);
});

test("a resume's note shows in its line, on one line and cut at 120 characters", () => {
  const resumed = (note: string): TimelineEvent => ({
    type: 'resumed',
    at: t0 + 700,
    step: 1,
    action: 'replan with note',
    note,
  });
  assert.equal(
    formatEventLine(resumed('focus on\n  the tests'), t0),
    '  +0.70s cycle 1 resumed: replan with note: "focus on the tests"',
  );
  const long = formatEventLine(resumed('x'.repeat(300)), t0);
  assert.ok(long.endsWith(`"${'x'.repeat(119)}…"`), long);
});

test('plain lines carry the time since the goal was created', () => {
  assert.equal(
    formatEventLine(events[5]!, t0),
    '  +0.42s cycle 1 [0] research-specialist finished research.md (240 B, 0.30s)',
  );
  assert.equal(
    formatEventLine(
      { type: 'paused', at: t0 + 2000, step: 2, pausedFor: 'escalation', reason: 'max depth 5 reached' },
      t0,
    ),
    '  +2.00s cycle 2 paused for a human (escalation): max depth 5 reached',
  );
});

test('text from users and models is escaped: no control character reaches the terminal, one line stays one', () => {
  const hostile = '\x1b[2J\x1b]0;pwned\x07 \u009b2J\nsecond line';
  const bad: TimelineEvent[] = [
    { type: 'created', at: t0, goal: `Sort ${hostile}` },
    ...events.slice(1, 3),
    {
      type: 'subtask_failed',
      at: t0 + 500,
      step: 1,
      index: 1,
      role: 'code-writer',
      artifact: 'solution.py',
      reason: `broke ${hostile}`,
    },
    { type: 'reflected', at: t0 + 520, step: 1, decision: 'escalate', reason: `why ${hostile}`, outcomes: [] },
    { type: 'paused', at: t0 + 530, step: 1, pausedFor: 'escalation', reason: `human ${hostile}` },
  ];
  const v = new TimelineView();
  for (const e of bad) v.apply(e);
  const out = v.render();
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
  const control = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;
  assert.doesNotMatch(out, control);
  // goal, cycle, two subtasks, reason: the redraw counts lines, so a reason's \n must not add one.
  assert.equal(out.split('\n').length, 5, out);
  assert.match(out, /^goal: Sort \\u001b\[2J\\u001b\]0;pwned\\u0007 \\u009b2J\\nsecond line {2}\[awaiting_human\]/);
  assert.match(out, /→ escalate \(why \\u001b\[2J/);
  assert.match(out, /failed {2}\(broke \\u001b\[2J/);
  assert.match(out, /\nreason: human \\u001b\[2J.*\\nsecond line$/);
  for (const e of bad) {
    const line = formatEventLine(e, t0);
    assert.doesNotMatch(line, control, line);
    assert.doesNotMatch(line, /\n/, line);
  }
  assert.equal(
    formatEventLine(bad[4]!, t0),
    '  +0.52s cycle 1 reflected: escalate (why \\u001b[2J\\u001b]0;pwned\\u0007 \\u009b2J\\nsecond line)',
  );
});

test('tool calls: a plain line each (tool, ok or failed, time); the tree counts them per subtask attempt', () => {
  const call = (at: number, index: number | undefined, tool: string, ok: boolean): TimelineEvent => ({
    type: 'tool_called',
    at,
    step: 1,
    ...(index === undefined ? {} : { index }),
    role: 'code-writer',
    threadId: 'goal-tv0000000001--code-writer-0000abcd',
    tool,
    ms: 12,
    ok,
  });
  assert.equal(
    formatEventLine(call(t0 + 300, 1, 'edit_file', true), t0),
    '  +0.30s cycle 1 [1] code-writer called edit_file (ok, 12 ms)',
  );
  assert.equal(
    formatEventLine(call(t0 + 310, 1, 'unknown', false), t0),
    '  +0.31s cycle 1 [1] code-writer called unknown (FAILED, 12 ms)',
  );
  assert.equal(
    formatEventLine(call(t0 + 320, undefined, 'grep', true), t0),
    '  +0.32s cycle 1 code-writer called grep (ok, 12 ms)',
  );
  const cutShort = { ...call(t0 + 330, 1, 'mcp:pay/charge', false), unknown: true } as TimelineEvent;
  assert.equal(
    formatEventLine(cutShort, t0),
    '  +0.33s cycle 1 [1] code-writer called mcp:pay/charge (OUTCOME UNKNOWN: its run died mid-call; not made again)',
  );

  const v = new TimelineView();
  for (const e of events) v.apply(e);
  v.apply(call(t0 + 300, 1, 'grep', true));
  assert.match(v.render(), /└─ \[1\] code-writer\s+solution\.py\s+running {2}\(1 tool call\)/);
  v.apply(call(t0 + 310, 1, 'edit_file', false));
  v.apply(call(t0 + 320, 1, 'edit_file', true));
  v.apply(call(t0 + 330, undefined, 'grep', true)); // no subtask index: not counted
  v.apply({ ...call(t0 + 340, 7, 'grep', true) }); // an unknown subtask: ignored
  let out = v.render();
  assert.match(out, /└─ \[1\] code-writer\s+solution\.py\s+running {2}\(3 tool calls\)/);
  assert.match(
    out,
    /├─ \[0\] research-specialist\s+research\.md\s+done {2}\(0\.30s, 240 B\)/,
    'no calls: nothing shown',
  );
  assert.equal(out.split('\n').length, 4, 'tool calls add no lines to the tree');
  // A new attempt counts its own calls.
  v.apply({ ...(events[4] as TimelineEvent), at: t0 + 400, attempt: 2 } as TimelineEvent);
  out = v.render();
  assert.match(out, /└─ \[1\] code-writer\s+solution\.py\s+running$/m);
  v.apply(call(t0 + 410, 1, 'read_file', true));
  v.apply({
    type: 'subtask_finished',
    at: t0 + 900,
    step: 1,
    index: 1,
    role: 'code-writer',
    artifact: 'solution.py',
    bytes: 99,
    ms: 500,
  });
  assert.match(v.render(), /└─ \[1\] code-writer\s+solution\.py\s+done {2}\(1 tool call, 0\.50s, 99 B\)/);
});

test('a tool name is escaped like any model-written text', () => {
  const e: TimelineEvent = {
    type: 'tool_called',
    at: t0 + 5,
    step: 1,
    index: 0,
    role: 'r',
    threadId: 't',
    tool: 'mcp:x/\x1b[2Jevil',
    ms: 1,
    ok: true,
  };
  assert.equal(formatEventLine(e, t0), '  +0.01s cycle 1 [0] r called mcp:x/\\u001b[2Jevil (ok, 1 ms)');
});

test('each finished or failed subtask shows the tokens its model calls used, in the tree and the plain line', () => {
  const end = (e: Partial<TimelineEvent>) => ({ ...events[5]!, ...e }) as TimelineEvent;
  const finished = end({ tokens: 158 });
  const failed = end({ type: 'subtask_failed', index: 1, role: 'code-writer', artifact: 'solution.py', reason: 'x' });
  const v = new TimelineView();
  for (const e of [...events.slice(0, 5), finished, { ...failed, tokens: 2048 } as TimelineEvent]) v.apply(e);
  const out = v.render();
  assert.match(out, /├─ \[0\] research-specialist\s+research\.md\s+done {2}\(0\.30s, 240 B, 158 tok\)/);
  assert.match(out, /└─ \[1\] code-writer\s+solution\.py\s+failed {2}\(0\.30s, 240 B, 2048 tok, x\)/);
  assert.equal(
    formatEventLine(finished, t0),
    '  +0.42s cycle 1 [0] research-specialist finished research.md (240 B, 0.30s, 158 tok)',
  );
  assert.match(
    formatEventLine({ ...failed, tokens: 2048 } as TimelineEvent, t0),
    /FAILED solution\.py: x \(2048 tok\)$/,
  );
  // An event from before deepq recorded tokens: nothing shown for them.
  assert.doesNotMatch(formatEventLine(failed, t0), /tok/);
});

test('a start line says a later attempt, and a start of the same attempt after its run did not finish', () => {
  const start = events[4] as Extract<TimelineEvent, { type: 'subtask_started' }>;
  assert.equal(formatEventLine(start, t0), '  +0.13s cycle 1 [1] code-writer started solution.py');
  assert.equal(
    formatEventLine({ ...start, restarted: true }, t0),
    '  +0.13s cycle 1 [1] code-writer started solution.py (restarted: its earlier run did not finish)',
  );
  assert.equal(
    formatEventLine({ ...start, attempt: 2, restarted: true }, t0),
    '  +0.13s cycle 1 [1] code-writer started solution.py (attempt 2, restarted: its earlier run did not finish)',
  );
});

test("a goal's input files: under its text in the tree, in its created line; the first five when many", () => {
  const names = ['docs/spec.md', 'a.py', 'b.py', 'c.py', 'd.py', 'e.py', 'f.py'];
  const created: TimelineEvent = {
    type: 'created',
    at: t0,
    goal: 'Review',
    inputs: names.map((name) => ({ name, bytes: 1 })),
  };
  const view = new TimelineView();
  view.apply(created);
  assert.equal(view.render().split('\n')[1], 'files: docs/spec.md, a.py, b.py, c.py, d.py and 2 more');
  assert.match(
    formatEventLine(created, t0),
    /created: Review \(with docs\/spec\.md, a\.py, b\.py, c\.py, d\.py and 2 more\)$/,
  );
  const few: TimelineEvent = { type: 'created', at: t0, goal: 'Review', inputs: [{ name: 'x.md', bytes: 1 }] };
  assert.match(formatEventLine(few, t0), /created: Review \(with x\.md\)$/);
  const none = new TimelineView();
  none.apply({ type: 'created', at: t0, goal: 'Review' });
  assert.doesNotMatch(none.render(), /files:/);
});

test('files given with a resume: in its line, and joining the inputs under the goal (one given again once)', () => {
  const view = new TimelineView();
  view.apply({ type: 'created', at: t0, goal: 'Review', inputs: [{ name: 'spec.md', bytes: 1 }] });
  const resumed: TimelineEvent = {
    type: 'resumed',
    at: t0 + 900,
    step: 1,
    action: 'replan with files',
    inputs: [
      { name: 'spec.md', bytes: 2 },
      { name: 'data.csv', bytes: 3 },
    ],
  };
  view.apply(resumed);
  assert.equal(view.render().split('\n')[1], 'files: spec.md, data.csv');
  assert.equal(formatEventLine(resumed, t0), '  +0.90s cycle 1 resumed: replan with files (files: spec.md, data.csv)');
});

test('a call waiting for approval shows its invisible characters as escapes, in the view and as an event line', () => {
  const waiting = approvalRequested('mcp:files/del\u200bete', '{"code":"curl exa\u200bmple.com\u{e0041}"}');
  const decided: TimelineEvent = { ...waiting, type: 'approval_decided', decision: 'approved' } as TimelineEvent;
  const v = new TimelineView();
  for (const e of [...events, waiting]) v.apply(e);
  for (const text of [v.render(), formatEventLine(waiting, t0)]) {
    assert.doesNotMatch(text, /[\u200b\u{e0000}-\u{e007f}]/u);
    assert.match(text, /mcp:files\/del\\u200bete \{"code":"curl exa\\u200bmple\.com\\udb40\\udc41/);
  }
  assert.match(formatEventLine(decided, t0), /\(mcp:files\/del\\u200bete\) approved/);
});
