// How `watch` and the timeline lines show the new cycle events: a subtask stopped at its cap
// is `partial`, a stalled cycle is marked, a budget pause names the flag that carries the
// goal on, and a resume says which budgets were raised.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatEventLine, TimelineView } from '../../cli/timeline.ts';
import type { TimelineEvent } from '../../shared/goal/events.ts';

const t0 = 1_000_000;
const ref = { role: 'research-specialist', threadId: 'goal-tl0000000001--research-specialist-0000abcd' };

test('watch shows partial subtasks, the stalled cycle and a budget pause with its flag', () => {
  const events: TimelineEvent[] = [
    { type: 'created', at: t0, goal: 'Look around' },
    { type: 'dispatched', at: t0 + 10, step: 1, subtasks: [{ index: 0, role: ref.role, artifact: 'a.md' }] },
    { type: 'subtask_started', at: t0 + 20, step: 1, index: 0, artifact: 'a.md', attempt: 1, ...ref },
    {
      type: 'subtask_finished',
      at: t0 + 900,
      step: 1,
      index: 0,
      artifact: 'a.md',
      bytes: 12,
      ms: 880,
      reason: 'stopped at its token cap (1900 of 2000 tokens): partial',
      partial: true,
      ...ref,
    },
    { type: 'reflected', at: t0 + 950, step: 1, decision: 'escalate', reason: 'stalled: 3 cycles', outcomes: [] },
    { type: 'stalled', at: t0 + 950, step: 1, cycles: 3, reason: 'stalled: 3 cycles', action: 'escalate' },
  ];
  const view = new TimelineView();
  for (const e of events) view.apply(e);
  const tree = view.render();
  assert.match(tree, /└─ cycle 1 {2}→ escalate \(stalled: 3 cycles\) {2}\[stalled\]/);
  assert.match(tree, /\[0\] research-specialist +a\.md +partial/);
  assert.match(formatEventLine(events[3]!, t0), /finished PARTIAL a\.md: stopped at its token cap/);
  assert.match(formatEventLine(events[5]!, t0), /cycle 1 STALLED, escalating without asking the model: stalled/);

  const paused: TimelineEvent = {
    type: 'paused',
    at: t0 + 1000,
    step: 1,
    pausedFor: 'budget',
    budget: 'steps',
    reason: 'step budget exceeded: step 2 would pass the limit of 1',
  };
  view.apply(paused);
  assert.match(view.render(), /reason: step budget exceeded: .* \(raise it: deepq resume <goalId> --max-steps N\)$/);
  const resumed: TimelineEvent = {
    type: 'resumed',
    at: t0 + 2000,
    step: 1,
    action: 'raise budget',
    budgets: { maxSteps: 3, maxSeconds: 60 },
  };
  assert.match(formatEventLine(resumed, t0), /resumed: raise budget \(max steps 3, 60 more seconds\)$/);
});
