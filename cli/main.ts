// The deepq CLI: service commands, the producer commands, `up` and `demo`. Wiring only; each
// command group registers itself from cli/commands/.
import { Command } from 'commander';
import { exitCodeFor, userMessage } from '../shared/errors.ts';
import { redisRefusal } from '../shared/runtime/redis-hints.ts';
import { scrubSecrets } from '../shared/runtime/scrub.ts';
import { registerApprovalCommands } from './commands/approvals.ts';
import { registerDemoCommand } from './commands/demo.ts';
import { registerGoalCommands } from './commands/goals.ts';
import { registerServiceCommands } from './commands/services.ts';
import { registerTranscriptCommand } from './commands/transcript.ts';
import { registerUiCommand } from './commands/ui.ts';
import { closeClient } from './connect.ts';
import { safeLine } from './terminal.ts';

export function buildProgram(): Command {
  const program = new Command();
  program
    .name('deepq')
    .description('Run deep agents (planner → parallel subagents → reflector) on BullMQ and Redis.')
    .showHelpAfterError('(run deepq --help for usage)')
    // Commander's own errors echo what was typed (`unknown command '…'`): line by line, no raw
    // control characters; named as deepq's, like every other error.
    .configureOutput({
      outputError: (str, write) =>
        write(
          scrubSecrets(str)
            .split('\n')
            .map((line) => (line.startsWith('error: ') ? `deepq: ${safeLine(line)}` : safeLine(line)))
            .join('\n'),
        ),
    });
  // In this order: it is the order `deepq --help` lists the commands in.
  registerServiceCommands(program);
  registerGoalCommands(program);
  registerApprovalCommands(program);
  registerTranscriptCommand(program);
  registerUiCommand(program);
  registerDemoCommand(program);
  return program;
}

async function run(): Promise<void> {
  let failed = false;
  try {
    await buildProgram().parseAsync(process.argv);
  } catch (err) {
    // A refused Redis database or password fails every later command: name the cause.
    const e = (redisRefusal() ?? err) as Error;
    // Messages can echo what was typed (an unknown goal id): never raw control characters. A
    // message of several lines (a YAML parser's, with its excerpt) keeps them, indented under it.
    const lines = scrubSecrets(userMessage(e)).trimEnd().split(/\r?\n/).map(safeLine);
    process.stderr.write(`deepq: error: ${lines.join('\n  ')}\n`);
    if (process.env.DEEPQ_DEBUG) process.stderr.write(`${e.stack}\n`);
    process.exitCode = exitCodeFor(e);
    failed = true;
  } finally {
    await closeClient();
  }
  // A service that failed to start (e.g. Redis refused its password) may still hold open
  // connections and its ops server: exit rather than linger half-started, logging errors.
  if (failed) process.exit();
}

// `deepq goals | head -1`: the reader is gone, so nothing more can be shown; exit quietly
// rather than with a stack trace for a write nobody reads.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err;
  process.exit();
});

await run();
