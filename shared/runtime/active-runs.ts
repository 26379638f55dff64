// The job runs a service process has in flight, each with an abort controller of its own.
// BullMQ tracks a process's runs (lock renewal, cancelJob) by job id alone: a job the stalled
// check handed back to this same process while its first run still went on (a lock lost to a
// GC pause or a starved CPU) replaces the first run's entry there, so BullMQ renews the first
// run's lock with the new token and can no longer abort it. Here each run is its own entry.
import type { Job } from 'bullmq';

export interface ActiveRun {
  job: Job;
  token?: string;
  goalId?: string;
  /** What the handler sees: aborted with BullMQ's signal, or by this process (cancel, a later delivery). */
  controller: AbortController;
  /** Resolves once the run's processor settled. */
  settled: Promise<void>;
}

export class ActiveRuns {
  private readonly runs = new Set<ActiveRun>();

  /** Registers a run; `end()` must be called when its processor settles. */
  start(job: Job, token: string | undefined, bullSignal: AbortSignal | undefined): { run: ActiveRun; end: () => void } {
    const controller = new AbortController();
    if (bullSignal?.aborted) controller.abort(bullSignal.reason);
    else bullSignal?.addEventListener('abort', () => controller.abort(bullSignal.reason), { once: true });
    let end!: () => void;
    const settled = new Promise<void>((resolve) => {
      end = resolve;
    });
    const goalId = typeof job.data?.goalId === 'string' ? job.data.goalId : undefined;
    const run: ActiveRun = { job, token, goalId, controller, settled };
    this.runs.add(run);
    return {
      run,
      end: () => {
        this.runs.delete(run);
        end();
      },
    };
  }

  /** The other runs of the same job in this process (earlier deliveries still going on). */
  othersOf(run: ActiveRun): ActiveRun[] {
    return [...this.runs].filter((r) => r !== run && r.job.id === run.job.id && r.job.queueName === run.job.queueName);
  }

  /** Aborts every run of the goal; returns their job ids. */
  abortGoal(goalId: string, reason: string): string[] {
    const ids: string[] = [];
    for (const r of this.runs) {
      if (r.goalId !== goalId) continue;
      r.controller.abort(reason);
      ids.push(String(r.job.id));
    }
    return ids;
  }

  abortAll(reason: string): void {
    for (const r of this.runs) r.controller.abort(reason);
  }

  goalIds(): string[] {
    return [...new Set([...this.runs].flatMap((r) => (r.goalId ? [r.goalId] : [])))];
  }

  get size(): number {
    return this.runs.size;
  }
}
