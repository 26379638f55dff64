// A Runtime for the virtual-FS and sweep tests: private Redis, a fresh prefix and blob dir,
// the scripted provider, silent logs. Overrides of `vfs` keep the env's blob dir.

import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { GoalClient } from '../cli/goal-client.ts';
import { newGoalId } from '../shared/goal/ids.ts';
import { loadConfig } from '../shared/runtime/config.ts';
import { createRuntime, type Runtime } from '../shared/runtime/runtime.ts';
import { testEnv } from './fleet.ts';
import type { TestRedis } from './redis.ts';

export interface VfsTestRuntime {
  rt: Runtime;
  env: NodeJS.ProcessEnv;
  /** `<blob dir>/<prefix>/<goalId>`: where a goal's spilled artifacts live. */
  blobDirOf(goalId: string): string;
  /** Creates a goal (status queued) and returns its id. */
  newGoal(text?: string): Promise<string>;
  close(): Promise<void>;
}

export function vfsRuntime(
  redisUrl: string,
  extraEnv: NodeJS.ProcessEnv = {},
  overrides: { vfs?: Record<string, unknown>; [k: string]: unknown } = {},
): VfsTestRuntime {
  const env = testEnv(redisUrl, { LOG_LEVEL: 'silent', ...extraEnv });
  const { vfs, ...rest } = overrides;
  const cfg = loadConfig(env, { ...rest, ...(vfs ? { vfs: { blobDir: env.DEEPQ_BLOB_DIR, ...vfs } } : {}) });
  const rt = createRuntime(cfg, 'test');
  return {
    rt,
    env,
    blobDirOf: (goalId) => join(cfg.vfs.blobDir, cfg.prefix, goalId),
    async newGoal(text = 'a test goal') {
      const goalId = newGoalId();
      await rt.goals.create(goalId, text, {}, false);
      return goalId;
    },
    async close() {
      await rt.close();
      rmSync(cfg.vfs.blobDir, { recursive: true, force: true });
    },
  };
}

/** Every Redis key of a goal: its hash and everything under it. */
export async function keysOfGoal(rt: Runtime, goalId: string): Promise<string[]> {
  const out = (await rt.redis.exists(rt.goals.keys.goal(goalId))) ? [rt.goals.keys.goal(goalId)] : [];
  for await (const batch of rt.redis.scanStream({ match: rt.goals.keys.goalPattern(goalId), count: 1000 }))
    out.push(...(batch as string[]));
  return out.sort();
}

/** The file's VFS runtime on its private Redis, built once Redis is up and closed after. */
export function useVfsRuntime(redis: TestRedis, assign: (t: VfsTestRuntime) => void): void {
  let t: VfsTestRuntime | undefined;
  before(async () => {
    await redis.ready;
    t = vfsRuntime(redis.url);
    assign(t);
  });
  after(async () => {
    await t?.close();
  });
}

/**
 * The file's VFS runtime and a GoalClient (the CLI's producer side) on its config, built once
 * Redis is up (in the runtime's own hook: Node 20 runs top-level `before` hooks concurrently)
 * and closed after.
 */
export function useVfsClient(redis: TestRedis, assign: (t: VfsTestRuntime, client: GoalClient) => void): void {
  let client: GoalClient | undefined;
  useVfsRuntime(redis, (t) => {
    client = new GoalClient(t.rt.cfg);
    assign(t, client);
  });
  after(async () => client?.close());
}

/** A subtask's write meta for tests: a done artifact of step 1 by `writer`, with `extra` on top. */
export function writeMeta(writer: string, extra: Record<string, unknown> = {}) {
  return {
    status: 'done' as const,
    step: 1,
    role: 'research-specialist',
    threadId: 'goal-x--research-specialist-ab12',
    writer,
    ...extra,
  };
}

/**
 * Walks a goal through one cycle (planning, running, reflecting) to awaiting_human with the
 * reflector's `decision`, through the real transitions; false from any move fails the caller.
 */
export async function reflectToHuman(
  rt: Runtime,
  goalId: string,
  decision: 'end' | 'escalate',
  pausedFor: 'review' | 'escalation',
): Promise<boolean> {
  const lc = rt.lifecycle;
  const plan = { subtasks: [{ role: 'critic', instruction: 'i', expected_artifact: 'a.md', read_files: [] }] };
  const d = { step: 1, reflection: { decision, reason: 'a reason' }, outcomes: [] };
  return (
    !!(await lc.beginPlanning(goalId)) &&
    !!(await lc.dispatch(goalId, 1, plan)) &&
    !!(await lc.beginReflecting(goalId)) &&
    (await lc.awaitHuman(goalId, d, pausedFor))
  );
}
