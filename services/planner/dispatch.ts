// One cycle = one BullMQ flow: a reflect parent whose children are the subtasks, run in
// parallel in their roles' queues. Job ids are deterministic (`<goalId>:<step>:<index>`), so
// dispatching a cycle twice adds nothing.
import type { Plan } from '../../shared/goal/plan.ts';
import type { Config } from '../../shared/runtime/config.ts';
import type { ReflectJob, SubagentJob } from '../../shared/runtime/jobs.ts';
import {
  baseJobOptions,
  type Queues,
  REFLECT_QUEUE,
  reflectJobId,
  subagentQueueName,
  subtaskJobId,
} from '../../shared/runtime/queues.ts';

export async function dispatchCycle(queues: Queues, cfg: Config, goalId: string, step: number, plan: Plan) {
  const opts = baseJobOptions(cfg);
  await queues.flows().add({
    name: 'reflect',
    queueName: REFLECT_QUEUE,
    data: { goalId, step } satisfies ReflectJob,
    opts: { ...opts, jobId: reflectJobId(goalId, step) },
    children: plan.subtasks.map((t, index) => ({
      name: t.role,
      queueName: subagentQueueName(t.role),
      data: { goalId, step, index, ...t } satisfies SubagentJob,
      // A failed child never cancels its siblings; the reflector reads its reason.
      opts: { ...opts, jobId: subtaskJobId(goalId, step, index), ignoreDependencyOnFailure: true },
    })),
  });
}
