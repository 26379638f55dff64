// Horizontal scale with a fleet-wide cap: any number of processes share a role's queue, and
// the role's `fleetConcurrency` (BullMQ global concurrency) bounds them all together.

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { DEFAULT_ROLES } from '../../shared/agent/roles.ts';
import type { TimelineEvent } from '../../shared/goal/events.ts';
import { type Fleet, startFleet } from '../../testing/fleet.ts';
import { useRedis } from '../../testing/redis.ts';
import { tempDir } from '../../testing/temp-dir.ts';

const redis = useRedis();

function overlapMax(events: TimelineEvent[]): number {
  const marks = events
    .filter((e) => e.type === 'subtask_started' || e.type === 'subtask_finished')
    .map((e) => ({ at: e.at, d: e.type === 'subtask_started' ? 1 : -1 }))
    .sort((a, b) => a.at - b.at || a.d - b.d);
  let cur = 0;
  let max = 0;
  for (const m of marks) {
    cur += m.d;
    max = Math.max(max, cur);
  }
  return max;
}

async function fanOut(fleet: Fleet): Promise<TimelineEvent[]> {
  const goalId = await fleet.client.enqueue({ goal: 'Five research parts' });
  for (;;) {
    const events = (await fleet.client.goals.events(goalId)).map((e) => e.event);
    if (events.some((e) => e.type === 'reflected' && e.step === 1)) {
      await fleet.client.cancel(goalId);
      return events.filter((e) => 'step' in e && e.step === 1);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

const env = { DEEPQ_SCRIPTED_LATENCY_MS: '300', DEEPQ_SCRIPTED_FANOUT: '5' };
let capped: Fleet;
let free: Fleet;
before(async () => {
  await redis.ready;
  const dir = tempDir('deepq-fleet-');
  const file = join(dir, 'deepq.json');
  writeFileSync(
    file,
    JSON.stringify({
      roles: DEFAULT_ROLES.map((r) => (r.name === 'research-specialist' ? { ...r, fleetConcurrency: 2 } : r)),
    }),
  );
  capped = await startFleet(redis.url, { ...env, DEEPQ_CONFIG: file }, { roles: ['research-specialist'], replicas: 2 });
});
after(async () => {
  await capped?.stop();
  await free?.stop();
});

test('two processes of a role with fleetConcurrency 2 never run more than 2 of its jobs at once', async () => {
  const events = await fanOut(capped);
  assert.equal(events.filter((e) => e.type === 'subtask_finished').length, 5);
  assert.equal(overlapMax(events), 2);
});

test('restarted without the cap, the same two processes run all five subtasks at once', async () => {
  const prefix = capped.env.DEEPQ_PREFIX;
  await capped.stop();
  capped = undefined as unknown as Fleet;
  // The cap lives on the queue in Redis: the same queues, their config no longer setting one.
  free = await startFleet(redis.url, { ...env, DEEPQ_PREFIX: prefix }, { roles: ['research-specialist'], replicas: 2 });
  const events = await fanOut(free);
  assert.equal(overlapMax(events), 5);
});
