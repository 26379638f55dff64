// The reflector's job: runs once a cycle's children have all finished (failed ones too),
// evicts stale artifacts, then decides continue / replan / end / escalate. At max depth it
// escalates without asking the model.
import type { Job } from 'bullmq';
import { UnrecoverableError } from 'bullmq';
import { createAgent } from '../../shared/agent/create-agent.ts';
import { reflectionContract } from './decision-contract.ts';
import { endOverBudget, goalUsageSink } from '../../shared/goal/budgets.ts';
import { reflectorSpec } from '../../shared/runtime/config.ts';
import { ReflectJobSchema, type SubagentJobResult } from '../../shared/runtime/jobs.ts';
import { parseOrThrow } from '../../shared/zod.ts';
import { isTerminal } from '../../shared/goal/status.ts';
import { type Reflection } from '../../shared/goal/plan.ts';
import { BudgetExceededError } from '../../shared/errors.ts';
import type { GoalRecord } from '../../shared/goal/store.ts';
import { threadIdFor } from '../../shared/goal/keys.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { saveTranscript, shortId } from '../../shared/agent/transcripts.ts';
import { formatIndex, type FileEntry } from '../../shared/vfs/vfs.ts';

export interface SubtaskOutcome {
  index: number;
  role: string;
  artifact: string;
  status: 'done' | 'failed';
  reason?: string;
  bytes?: number;
}

/** Reads each child's result, or its failure reason when it failed for good. */
export async function collectOutcomes(job: Job, goal: GoalRecord): Promise<SubtaskOutcome[]> {
  const values = (await job.getChildrenValues()) as Record<string, SubagentJobResult>;
  const failures = await job.getIgnoredChildrenFailures();
  const byIndex = new Map<number, SubtaskOutcome>();
  const indexOf = (key: string) => Number(key.split(':').pop());
  for (const [key, v] of Object.entries(values)) {
    byIndex.set(indexOf(key), { index: indexOf(key), role: v.role, artifact: v.artifact_name, status: v.status === 'failed' ? 'failed' : 'done', reason: v.notes ?? undefined, bytes: v.bytes });
  }
  for (const [key, reason] of Object.entries(failures)) {
    const i = indexOf(key);
    const t = goal.plan?.subtasks[i];
    byIndex.set(i, { index: i, role: t?.role ?? '?', artifact: t?.expected_artifact ?? '?', status: 'failed', reason: String(reason).slice(0, 300) });
  }
  return [...byIndex.values()].sort((a, b) => a.index - b.index);
}

export function reflectorMessage(goal: GoalRecord, step: number, outcomes: SubtaskOutcome[], index: FileEntry[]): string {
  return [
    `Goal: ${goal.goal}`,
    `Cycle: ${step}`,
    `Plan: ${JSON.stringify(goal.plan)}`,
    `Outcomes:\n${outcomes.map((o) => `- ${o.artifact} (${o.role}): ${o.status}${o.reason ? `: ${o.reason}` : ''}`).join('\n') || '(none)'}`,
    `Current files:\n${formatIndex(index)}`,
  ].join('\n');
}

export async function processReflectJob(rt: Runtime, job: Job, signal?: AbortSignal): Promise<{ decision?: string; skipped?: string }> {
  let data;
  try {
    data = parseOrThrow(ReflectJobSchema, job.data, 'reflect job payload');
  } catch (err) {
    throw new UnrecoverableError((err as Error).message);
  }
  const { goalId, step } = data;
  const goal = await rt.goals.get(goalId);
  if (!goal) throw new UnrecoverableError(`unknown goal id: ${goalId}`);
  if (isTerminal(goal.status)) return { skipped: goal.status };
  // A stale delivery (its first process died before acking; the stalled check handed it out
  // again) for a cycle the goal has moved past, or a job for a cycle never dispatched:
  // moving the goal back to `reflecting` would strand the current cycle.
  if (goal.step !== step || goal.planStep > step || (goal.reflection?.step ?? 0) > step) {
    rt.logger.info({ goalId, step, jobId: job.id, status: goal.status, goalStep: goal.step }, 'stale reflect job: the goal is not at this cycle');
    return { skipped: `stale: the goal is ${goal.status} at cycle ${goal.step}` };
  }
  if (goal.status === 'queued' && goal.reflection?.step === step && !goal.review) {
    // Re-delivered after the decision was stored: finish the hand-off (job ids dedupe it).
    await rt.queues.addPlan({ goalId, step: step + 1 });
    return { decision: goal.reflection.decision };
  }
  const runThreadId = threadIdFor(goalId, 'reflector', shortId());
  const log = rt.logger.child({ goalId, step, role: 'reflector', threadId: runThreadId, jobId: job.id });
  if (!(await rt.goals.transition(goalId, { from: ['running', 'reflecting'], to: 'reflecting' }))) return { skipped: goal.status };

  const outcomes = await collectOutcomes(job, goal);
  const evicted = await rt.vfs.evict(goalId, step);
  if (evicted.length) log.info({ evicted: evicted.length }, 'evicted stale artifacts');

  let reflection: Reflection;
  let threadId: string | undefined;
  if (goal.reflection?.step === step) {
    reflection = goal.reflection; // re-delivered: keep the decision already taken
  } else if (step >= rt.cfg.maxDepth) {
    reflection = { decision: 'escalate', reason: `max depth ${rt.cfg.maxDepth} reached after ${step} cycle(s): a human must decide` };
  } else {
    threadId = runThreadId;
    const agent = createAgent(reflectorSpec(rt.cfg), {
      provider: rt.provider, logger: log, models: rt.cfg.models, metrics: rt.metrics,
      usageSink: goalUsageSink(rt, goal), retry: { ...rt.cfg.modelRetry, rateLimitToQueue: false },
    });
    let run;
    try {
      run = await agent.run<Reflection>({
        task: reflectorMessage(goal, step, outcomes, await rt.vfs.index(goalId)),
        contract: reflectionContract,
        ctx: { role: 'reflector', kind: 'reflector', goalId, step, threadId, signal },
      });
    } catch (err) {
      if (err instanceof BudgetExceededError) {
        await endOverBudget(rt, goalId, err.message, step);
        return { skipped: 'budget_exceeded' };
      }
      throw err;
    }
    await saveTranscript(rt, goalId, threadId, 'reflector', run.messages);
    if (!run.ok) {
      const reason = `reflector output rejected: ${run.problem}`;
      if (await rt.goals.transition(goalId, { to: 'failed', fields: { reason }, event: { type: 'finished', status: 'failed', step, reason } })) rt.metrics.goals.inc({ status: 'failed' });
      return { decision: 'failed' };
    }
    reflection = run.value!;
  }

  rt.metrics.decisions.inc({ decision: reflection.decision });
  const fields = { reflection: JSON.stringify({ ...reflection, step }), depth: step };
  const event = { type: 'reflected', step, decision: reflection.decision, reason: reflection.reason, ...(threadId ? { threadId } : {}), outcomes: outcomes.map((o) => ({ index: o.index, status: o.status })) };
  const fresh = (await rt.goals.get(goalId)) ?? goal;
  if (reflection.decision !== 'escalate' && fresh.review) {
    // The seed's interrupt after reflection: a human confirms every decision.
    if (await rt.goals.transition(goalId, { from: ['reflecting'], to: 'awaiting_human', fields: { ...fields, pausedFor: 'review', reason: `review: the reflector chose ${reflection.decision}` }, event })) {
      await rt.goals.appendEvent(goalId, { type: 'paused', step, pausedFor: 'review', decision: reflection.decision, reason: reflection.reason });
      rt.metrics.goals.inc({ status: 'awaiting_human' });
    }
  } else if (reflection.decision === 'end') {
    if (await rt.goals.transition(goalId, { from: ['reflecting'], to: 'done', fields: { ...fields, reason: reflection.reason }, event })) {
      await rt.goals.appendEvent(goalId, { type: 'finished', status: 'done', step });
      rt.metrics.goals.inc({ status: 'done' });
    }
  } else if (reflection.decision === 'escalate') {
    if (await rt.goals.transition(goalId, { from: ['reflecting'], to: 'awaiting_human', fields: { ...fields, reason: reflection.reason, pausedFor: 'escalation' }, event })) {
      await rt.goals.appendEvent(goalId, { type: 'paused', step, pausedFor: 'escalation', reason: reflection.reason });
      rt.metrics.goals.inc({ status: 'awaiting_human' });
    }
  } else if (await rt.goals.transition(goalId, { from: ['reflecting'], to: 'queued', fields, event })) {
    await rt.queues.addPlan({ goalId, step: step + 1 });
  }
  log.info({ decision: reflection.decision }, 'reflected');
  return { decision: reflection.decision };
}

