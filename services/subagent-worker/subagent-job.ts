// A subagent job: run the role's agent on a fresh message list (P52), write the artifact
// to the virtual FS, return a small SubagentResult without content or transcript.
import { UnrecoverableError, Worker, type Job, type Queue } from 'bullmq';
import { createAgent } from '../../shared/agent/create-agent.ts';
import { contractFor } from '../../shared/agent/output-contracts.ts';
import { createVfsTools } from '../../shared/agent/tools.ts';
import { endOverBudget, goalUsageSink } from '../../shared/goal/budgets.ts';
import { SubagentJobSchema, type SubagentJob, type SubagentJobResult } from '../../shared/runtime/jobs.ts';
import { isTerminal } from '../../shared/goal/status.ts';
import { parseOrThrow } from '../../shared/zod.ts';
import { BudgetExceededError, ProviderRateLimitError } from '../../shared/errors.ts';
import { threadIdFor } from '../../shared/goal/keys.ts';
import type { RoleSpec } from '../../shared/agent/roles.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { saveTranscript, shortId } from '../../shared/agent/transcripts.ts';
import { ModelCallError } from '../../shared/agent/providers/types.ts';

/** The task: the instruction plus the contents of the read_files it names, one user message. */
export async function buildSubagentTask(rt: Pick<Runtime, 'vfs'>, job: SubagentJob): Promise<string> {
  const parts: string[] = [];
  for (const name of job.read_files) {
    const content = await rt.vfs.read(job.goalId, name);
    parts.push(content === null ? `# ${name}\n(not available: the file was evicted or never written)` : `# ${name}\n${content}`);
  }
  return parts.length ? `${parts.join('\n\n')}\n\n## Task\n${job.instruction}` : job.instruction;
}

export interface SubagentDeps {
  rt: Runtime;
  role: RoleSpec;
  /** The role's queue, paused fleet-wide on a provider 429. */
  queue: Queue;
}

export async function processSubagentJob(deps: SubagentDeps, job: Job, signal?: AbortSignal): Promise<SubagentJobResult> {
  const { rt, role } = deps;
  let data: SubagentJob;
  try {
    data = parseOrThrow(SubagentJobSchema, job.data, 'subagent job payload');
    if (data.role !== role.name) throw new Error(`job is for role ${data.role}, this worker serves ${role.name}`);
  } catch (err) {
    throw new UnrecoverableError((err as Error).message);
  }
  const { goalId, step, index } = data;
  const startedAt = Date.now();
  const threadId = threadIdFor(goalId, role.name, shortId());
  const base = { artifact_name: data.expected_artifact, role: role.name, threadId, bytes: 0, startedAt };
  const goal = await rt.goals.get(goalId);
  if (!goal) throw new UnrecoverableError(`unknown goal id: ${goalId}`);
  if (isTerminal(goal.status)) {
    return { ...base, status: 'failed', notes: `skipped: goal is ${goal.status}`, finishedAt: Date.now(), skipped: goal.status };
  }
  const log = rt.logger.child({ goalId, step, role: role.name, threadId, jobId: job.id });
  await rt.goals.appendEvent(goalId, { type: 'subtask_started', step, index, role: role.name, artifact: data.expected_artifact, threadId, attempt: job.attemptsMade + 1 });

  const agent = createAgent(role, {
    provider: rt.provider, logger: log, models: rt.cfg.models, metrics: rt.metrics,
    usageSink: goalUsageSink(rt, goal), retry: { ...rt.cfg.modelRetry, rateLimitToQueue: true },
    toolResultMaxChars: rt.cfg.vfs.toolResultMaxChars,
  });
  const tools = createVfsTools(rt.vfs, { goalId, step, role: role.name, threadId, writer: String(job.id) }, role.tools);
  let run;
  try {
    run = await agent.run<unknown>({
      task: await buildSubagentTask(rt, data),
      tools,
      contract: contractFor(role.contract),
      ctx: { role: role.name, kind: 'subagent', goalId, step, threadId, signal },
    });
  } catch (err) {
    if (err instanceof ProviderRateLimitError) {
      // Fleet flow control: pause this role's whole queue, put the job back untouched. A
      // provider that never stops saying 429 must not keep a job circling forever, though.
      const requeues = Number(job.data?.rateLimitRequeues ?? 0) + 1;
      if (requeues > rt.cfg.modelRetry.maxRateLimitRequeues) {
        throw new Error(`provider rate limit persisted through ${requeues - 1} queue pauses: ${err.message}`);
      }
      await job.updateData({ ...job.data, rateLimitRequeues: requeues });
      log.warn({ retryAfterMs: err.retryAfterMs, requeues }, 'provider rate limit: pausing the queue');
      await deps.queue.rateLimit(Math.max(1, err.retryAfterMs));
      throw Worker.RateLimitError();
    }
    if (err instanceof BudgetExceededError) {
      await endOverBudget(rt, goalId, err.message, step);
      return { ...base, status: 'failed', notes: err.message.slice(0, 200), finishedAt: Date.now(), skipped: 'budget_exceeded' };
    }
    if (err instanceof ModelCallError && err.kind === 'aborted') {
      const g = await rt.goals.get(goalId);
      if (g && isTerminal(g.status)) return { ...base, status: 'failed', notes: `aborted: goal is ${g.status}`, finishedAt: Date.now(), skipped: g.status };
    }
    throw err;
  }
  await saveTranscript(rt, goalId, threadId, role.name, run.messages);

  const status = run.ok ? 'done' : 'failed';
  const notes = run.ok ? (run.contractRetries ? 'accepted after one contract retry' : null) : (run.problem ?? 'failed').slice(0, 200);
  let bytes = 0;
  if (run.text) {
    const entry = await rt.vfs.write(goalId, data.expected_artifact, run.text, { status, step, role: role.name, threadId, writer: String(job.id) });
    bytes = entry.bytes;
  }
  const result: SubagentJobResult = { ...base, status, notes, bytes, finishedAt: Date.now() };
  await rt.goals.appendEvent(goalId, {
    type: run.ok ? 'subtask_finished' : 'subtask_failed', step, index, role: role.name, artifact: data.expected_artifact,
    threadId, bytes, ms: result.finishedAt - startedAt, ...(notes ? { reason: notes } : {}),
  });
  log.info({ status, bytes, turns: run.turns }, 'subtask finished');
  return result;
}
