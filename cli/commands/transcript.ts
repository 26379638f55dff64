// `deepq transcript`: one agent run's stored transcript, by thread id. The runtime is imported
// when the command runs, so that `deepq --help` stays fast.
import type { Command } from 'commander';
import { connected } from '../connect.ts';
import { printJson } from './output.ts';

export function registerTranscriptCommand(program: Command): void {
  program
    .command('transcript')
    .description("show an agent run's transcript by thread id")
    .argument('<threadId>')
    .action(async (threadId: string) => {
      const [{ loadTranscript }, { loadConfig }, { createRuntime }] = await Promise.all([
        import('../../shared/agent/transcripts.ts'),
        import('../../shared/runtime/config.ts'),
        import('../../shared/runtime/runtime.ts'),
      ]);
      const cfg = loadConfig();
      // Transcripts are read through a runtime, not the goal client; its logs would be noise here.
      const rt = createRuntime({ ...cfg, logLevel: 'silent' }, 'cli');
      try {
        await connected(rt.redis, cfg.redisUrl);
        const t = await loadTranscript(rt, threadId);
        if (!t) throw new Error(`no transcript for thread id ${threadId} (unknown, or expired after its TTL)`);
        printJson(t, 2);
      } finally {
        await rt.close();
      }
    });
}
