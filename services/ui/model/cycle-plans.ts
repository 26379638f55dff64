// A cycle's plan in the planner's own words (instruction, read_files). The goal hash keeps
// only the latest plan, so older cycles are read from what is still there: the subtask jobs
// BullMQ keeps (an hour after they complete), else the planner's stored transcript (a day).
// Nothing left: the page shows the roles and artifacts the timeline has.
import { jsonContract } from '../../../shared/agent/output-contracts.ts';
import { loadTranscript } from '../../../shared/agent/transcripts.ts';
import { PlanSchema, type Subtask, SubtaskSchema } from '../../../shared/goal/plan.ts';
import type { GoalRecord } from '../../../shared/goal/store.ts';
import { subagentQueueName, subtaskJobId } from '../../../shared/runtime/queues.ts';
import type { UiContext } from '../context.ts';
import type { CycleView, GoalTimeline } from './goal-timeline.ts';

export interface CyclePlan {
  subtasks: Subtask[];
  source: 'goal' | 'jobs' | 'planner transcript';
}

const planOutput = jsonContract('plan', 'a plan', PlanSchema);

async function fromJobs(ctx: UiContext, goalId: string, cycle: CycleView): Promise<Subtask[] | null> {
  if (!cycle.subtasks.length) return null;
  const found = await Promise.all(
    cycle.subtasks.map(async (s) => {
      const job = await ctx.client.queues
        .get(subagentQueueName(s.role))
        .getJob(subtaskJobId(goalId, cycle.step, s.index));
      const parsed = SubtaskSchema.safeParse(job?.data);
      return parsed.success ? parsed.data : null;
    }),
  );
  return found.every((t) => t !== null) ? (found as Subtask[]) : null;
}

async function fromTranscript(ctx: UiContext, cycle: CycleView): Promise<Subtask[] | null> {
  if (!cycle.plannerThreadId) return null;
  const t = await loadTranscript(ctx.client, cycle.plannerThreadId);
  const last = t?.messages.filter((m) => m.role === 'assistant').at(-1);
  if (!last) return null;
  const text =
    typeof last.content === 'string'
      ? last.content
      : last.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
  const checked = planOutput.check(text);
  return checked.ok ? checked.value.subtasks : null;
}

export async function cyclePlan(ctx: UiContext, goal: GoalRecord, cycle: CycleView): Promise<CyclePlan | null> {
  if (goal.plan && goal.planStep === cycle.step) return { subtasks: goal.plan.subtasks, source: 'goal' };
  const jobs = await fromJobs(ctx, goal.goalId, cycle);
  if (jobs) return { subtasks: jobs, source: 'jobs' };
  const transcript = await fromTranscript(ctx, cycle);
  return transcript ? { subtasks: transcript, source: 'planner transcript' } : null;
}

/** Where the page says a cycle's plan was read from, in a reader's words. */
const SOURCE_TEXT: Record<CyclePlan['source'], string> = {
  goal: "the goal's current plan",
  jobs: "the cycle's subtask jobs",
  'planner transcript': "the planner's transcript",
};

/** Adds each listed cycle's plan to the timeline, where one can still be found. */
export async function attachPlans(ctx: UiContext, goal: GoalRecord, timeline: GoalTimeline, steps: number[]) {
  await Promise.all(
    steps.map(async (step) => {
      const cycle = timeline.get(step);
      const plan = cycle && (await cyclePlan(ctx, goal, cycle));
      if (plan) timeline.attachPlan(step, plan.subtasks, SOURCE_TEXT[plan.source]);
    }),
  );
}
