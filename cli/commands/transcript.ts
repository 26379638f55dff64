// `deepq transcript`: one agent run's stored transcript, by thread id. The runtime is imported
// when the command runs, so that `deepq --help` stays fast.
import type { Command } from 'commander';
import type { Runtime } from '../../shared/runtime/runtime.ts';
import { connected } from '../connect.ts';
import { print, printJson } from './output.ts';

export function registerTranscriptCommand(program: Command): void {
  program
    .command('transcript')
    .description("show an agent run's transcript by thread id; given a goal id, list its runs' thread ids")
    .argument('<threadId|goalId>')
    .action(async (id: string) => {
      const [transcripts, { loadConfig }, { createRuntime }, { isGoalId }] = await Promise.all([
        import('../../shared/agent/transcripts.ts'),
        import('../../shared/runtime/config.ts'),
        import('../../shared/runtime/runtime.ts'),
        import('../../shared/goal/ids.ts'),
      ]);
      const cfg = loadConfig();
      // Transcripts are read through a runtime, not the goal client; its logs would be noise here.
      const rt = createRuntime({ ...cfg, logLevel: 'silent' }, 'cli');
      try {
        await connected(rt.redis, cfg.redisUrl);
        if (isGoalId(id)) return await listThreads(rt, id, cfg.transcriptTtlSeconds);
        const t = await transcripts.loadTranscript(rt, id);
        // A run's transcript is stored when the run ends.
        const why = 'still running or paused, unknown, or expired after its TTL';
        if (!t) throw new Error(`no transcript for thread id ${id} (${why})`);
        printJson(t, 2);
      } finally {
        await rt.close();
      }
    });
}

/** A goal's stored transcripts, newest first: thread id and when it was saved. */
async function listThreads(rt: Runtime, goalId: string, ttlSeconds: number): Promise<void> {
  const { storedThreads } = await import('../../shared/agent/transcripts.ts');
  if (!(await rt.goals.get(goalId))) {
    const thread = `a run's thread id looks like goal-${goalId}--<role>-<hex>`;
    throw new Error(`no goal ${goalId} (given a goal id, this lists its runs; ${thread})`);
  }
  const threads = await storedThreads(rt, goalId, ttlSeconds);
  if (!threads.length) print('(no transcripts kept)');
  for (const t of threads) print(`${t.threadId}  ${new Date(t.savedAt).toISOString()}`);
}
