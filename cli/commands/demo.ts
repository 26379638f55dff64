// `deepq demo`: the command only; the run itself is in cli/demo.ts, imported when it runs.
import type { Command } from 'commander';

const DEFAULT_GOAL = 'Write a function that sorts a list of numbers, with a short research note';

export function registerDemoCommand(program: Command): void {
  program
    .command('demo')
    .description('run one goal end to end with every service as its own process')
    .argument('[goal]', 'the goal text', DEFAULT_GOAL)
    .action(async (goal: string) => {
      const { runDemo } = await import('../demo.ts');
      process.exitCode = await runDemo(goal);
    });
}
