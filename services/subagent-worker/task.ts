// The subagent's task: the instruction plus the contents of the read_files it names, as one
// user message (P52: nothing else from any other agent).
import type { SubagentJob } from '../../shared/runtime/jobs.ts';
import type { VirtualFs } from '../../shared/vfs/vfs.ts';

export async function buildSubagentTask(rt: { vfs: Pick<VirtualFs, 'read'> }, job: SubagentJob): Promise<string> {
  const parts: string[] = [];
  for (const name of job.read_files) {
    const content = await rt.vfs.read(job.goalId, name);
    parts.push(
      content === null ? `# ${name}\n(not available: the file was evicted or never written)` : `# ${name}\n${content}`,
    );
  }
  return parts.length ? `${parts.join('\n\n')}\n\n## Task\n${job.instruction}` : job.instruction;
}
