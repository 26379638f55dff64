// Queue names, deterministic job ids and job options. Every BullMQ key lives under the
// deepq prefix, beside the goal keys.
import { type ConnectionOptions, FlowProducer, type JobsOptions, Queue } from 'bullmq';
import type { Config } from './config.ts';
import type { PlanJob } from './jobs.ts';
import { bullTelemetry } from './tracing.ts';

export const PLAN_QUEUE = 'plan';
export const REFLECT_QUEUE = 'reflect';
export const MAINTENANCE_QUEUE = 'maintenance';
export const SWEEP_SCHEDULER_ID = 'ttl-sweep';
export const RECONCILE_SCHEDULER_ID = 'reconcile';
/** Maintenance job names: the reflector's maintenance worker routes on them. */
export const MAINTENANCE_JOBS = { sweep: 'sweep', reconcile: 'reconcile', deadline: 'deadline' } as const;

export function subagentQueueName(role: string): string {
  return `subagent-${role}`;
}

/** `<goalId>:<step>:<index>` for subtasks; the plan and reflect jobs use the same shape. */
export function subtaskJobId(goalId: string, step: number, index: number): string {
  return `${goalId}:${step}:${index}`;
}
export function planJobId(goalId: string, step: number, attempt = 0): string {
  // A resumed goal may plan the same step again: the attempt suffix keeps ids unique then.
  return `${goalId}:${step}:plan${attempt ? `-r${attempt}` : ''}`;
}
export function reflectJobId(goalId: string, step: number): string {
  return `${goalId}:${step}:reflect`;
}
/** A new goal's first plan job's BullMQ priority: any, so long as it is one (see addPlan). */
const NEW_GOAL_PRIORITY = 1;

/** A deadline job fires this much after the budget's end, so the elapsed time is past it, not at it. */
export const DEADLINE_MARGIN_MS = 50;

/** One deadline job per goal with a time budget: it ends the goal mid-cycle. */
export function deadlineJobId(goalId: string): string {
  return `deadline-${goalId}`; // no colon: BullMQ refuses it in the id of a delayed job
}

export function baseJobOptions(cfg: Config): JobsOptions {
  return {
    attempts: cfg.subtaskAttempts,
    backoff: { type: 'exponential', delay: 1000 },
    // Completed jobs stay an hour so a re-delivered plan cannot re-create finished children.
    // Their count per queue (completedJobsKept) is capped by the sweep (services/reflector/trim-jobs.ts).
    removeOnComplete: { age: 3600 },
    removeOnFail: { age: 7 * 86400, count: 50_000 },
  };
}

export class Queues {
  private readonly queues = new Map<string, Queue>();
  private flowProducer?: FlowProducer;
  constructor(
    private readonly connection: ConnectionOptions,
    private readonly cfg: Config,
  ) {}

  get(name: string): Queue {
    let q = this.queues.get(name);
    if (!q) {
      q = new Queue(name, {
        connection: this.connection,
        prefix: this.cfg.prefix,
        defaultJobOptions: baseJobOptions(this.cfg),
        telemetry: bullTelemetry(),
      });
      q.on('error', () => {});
      this.queues.set(name, q);
    }
    return q;
  }

  flows(): FlowProducer {
    if (!this.flowProducer) {
      this.flowProducer = new FlowProducer({
        connection: this.connection,
        prefix: this.cfg.prefix,
        telemetry: bullTelemetry(),
      });
      this.flowProducer.on('error', () => {});
    }
    return this.flowProducer;
  }

  /**
   * At the time budget's end (`endsAt`, ms: the goal's createdAt + maxSeconds), the reflector's
   * maintenance worker checks the goal. Replaces the goal's pending deadline (a resume's new
   * limit): BullMQ ignores an add whose id it holds, so the old one would fire at the old limit.
   * One firing right now cannot be removed; it reads the goal's budgets as they are (and waits
   * again if it came early), and the reconciler adds a deadline a goal lacks.
   */
  async addDeadline(goalId: string, endsAt: number): Promise<void> {
    const queue = this.get(MAINTENANCE_QUEUE);
    const opts = {
      jobId: deadlineJobId(goalId),
      delay: Math.max(0, endsAt - Date.now() + DEADLINE_MARGIN_MS),
      removeOnComplete: true,
      removeOnFail: 100,
    };
    await (await queue.getJob(opts.jobId))?.remove().catch(() => {});
    await queue.add(MAINTENANCE_JOBS.deadline, { goalId }, opts);
  }

  /**
   * A goal's first plan job waits behind work already under way: BullMQ takes a queue's jobs
   * without a priority before its prioritized ones, so goals that have started plan their later
   * cycles first (their subtasks and reflections meet no new goal in their queues), and a flood
   * of new goals does not hold them up. New goals among themselves go first come, first served.
   */
  async addPlan(data: PlanJob, attempt = 0): Promise<void> {
    const priority = data.step === 1 ? { priority: NEW_GOAL_PRIORITY } : {};
    await this.get(PLAN_QUEUE).add('plan', data, { jobId: planJobId(data.goalId, data.step, attempt), ...priority });
  }

  allNames(): string[] {
    return [PLAN_QUEUE, REFLECT_QUEUE, MAINTENANCE_QUEUE, ...this.cfg.roles.map((r) => subagentQueueName(r.name))];
  }

  async close(): Promise<void> {
    await Promise.allSettled([...[...this.queues.values()].map((q) => q.close()), this.flowProducer?.close()]);
  }
}
