// `deepq ui`: the web inspector (services/ui/). Loopback unless --host says otherwise; off
// loopback it refuses to start without DEEPQ_UI_TOKEN.
import type { Command } from 'commander';
import { reachableUrl } from '../../shared/runtime/addresses.ts';
import { int } from '../args.ts';
import { safeLine } from '../terminal.ts';
import { print } from './output.ts';

export function registerUiCommand(program: Command): void {
  program
    .command('ui')
    .description('serve the web inspector: goals, cycles, artifacts, transcripts, queues; live')
    .option('--port <port>', 'port to listen on (0: any free port)', int('--port', 0, 65_535), 8080)
    .option('--host <address>', 'address to bind; off loopback DEEPQ_UI_TOKEN is required', '127.0.0.1')
    .action(async (o: { port: number; host: string }) => {
      // Imported only when run: the other commands need none of the web stack.
      const [{ main }, { loadConfig }, { whenRedisRefused }] = await Promise.all([
        import('../../services/ui/main.ts'),
        import('../../shared/runtime/config.ts'),
        import('../../shared/runtime/redis-hints.ts'),
      ]);
      const cfg = loadConfig();
      // Its pages would only fail one by one: a database Redis refuses stops it, as it stops the CLI.
      whenRedisRefused((err) => {
        process.stderr.write(`deepq: error: ${safeLine(err.message)}\n`);
        process.exit(78);
      });
      const token = process.env.DEEPQ_UI_TOKEN || undefined;
      const ui = await main(cfg, { host: o.host, port: o.port, token });
      print(`deepq ui: open ${ui.url}${token ? ' (sign in with DEEPQ_UI_TOKEN)' : ''}`);
      print(`deepq ui: metrics ${reachableUrl(cfg.metricsHost, ui.metricsPort, '/metrics')}`);
    });
}
