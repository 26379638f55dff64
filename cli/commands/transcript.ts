// `deepq transcript`: one agent run's stored transcript, by thread id. Read through the CLI's
// shared reader (its Redis guarded like every one-shot command's); imported when the command runs,
// so that `deepq --help` stays fast.
import type { Command } from 'commander';
import { reader } from '../connect.ts';
import type { GoalReader } from '../goal-reader.ts';
import { print, printJson } from './output.ts';

export function registerTranscriptCommand(program: Command): void {
  program
    .command('transcript')
    .description("show an agent run's transcript by thread id; given a goal id, list its runs' thread ids")
    .argument('<threadId|goalId>')
    .action(async (id: string) => {
      const [transcripts, { isGoalId }, c] = await Promise.all([
        import('../../shared/agent/transcripts.ts'),
        import('../../shared/goal/ids.ts'),
        reader(),
      ]);
      if (isGoalId(id)) return await listThreads(c, id, c.cfg.transcriptTtlSeconds);
      const t = await transcripts.loadTranscript(c, id);
      // A run's transcript is stored when the run ends.
      const why = 'still running or paused, unknown, or expired after its TTL';
      if (!t) throw new Error(`no transcript for thread id ${id} (${why})`);
      printJson(t, 2);
    });
}

/** A goal's stored transcripts, newest first: thread id and when it was saved. */
async function listThreads(rt: GoalReader, goalId: string, ttlSeconds: number): Promise<void> {
  const { storedThreads } = await import('../../shared/agent/transcripts.ts');
  if (!(await rt.goals.get(goalId))) {
    const thread = `a run's thread id looks like goal-${goalId}--<role>-<hex>`;
    throw new Error(`no goal ${goalId} (given a goal id, this lists its runs; ${thread})`);
  }
  const threads = await storedThreads(rt, goalId, ttlSeconds);
  if (!threads.length) print('(no transcripts kept)');
  for (const t of threads) print(`${t.threadId}  ${new Date(t.savedAt).toISOString()}`);
}
