// The service commands: planner, reflector and worker run one service in this process;
// `up` runs all of them as child processes. Config and services are imported when a command
// runs, so that `deepq --help` stays fast.
import { type Command, Option } from 'commander';
import { ValidationError } from '../../shared/errors.ts';
import { reachableUrl } from '../../shared/runtime/addresses.ts';
import type { Config } from '../../shared/runtime/config.ts';
import { catchStartSignals } from '../../shared/runtime/start-signals.ts';
import { int } from '../args.ts';
import { type ChildSpec, CONFIG_ERROR_EXIT, planChildren, type Supervisor, supervise } from '../supervisor.ts';
import { print } from './output.ts';

/** The config's bound on concurrency, for the flag too. */
const MAX_CONCURRENCY = 1000;
/** `deepq up` is one machine: each replica is a Node process per role (about 100 MB each). */
const MAX_REPLICAS = 64;

const concurrency = () =>
  new Option('--concurrency <n>', 'jobs this process runs at once (default: config concurrency, 8)').argParser(
    int('--concurrency', 1, MAX_CONCURRENCY),
  );

export function registerServiceCommands(program: Command): void {
  // Each service is imported only when run: the producer commands need none of them.
  program
    .command('planner')
    .description('run a planner service process')
    .addOption(concurrency())
    .action(async (o) => {
      catchStartSignals();
      const [{ main }, { loadConfig }] = await Promise.all([
        import('../../services/planner/main.ts'),
        import('../../shared/runtime/config.ts'),
      ]);
      const cfg = loadConfig();
      await main(cfg, { concurrency: o.concurrency ?? cfg.concurrency });
    });
  program
    .command('reflector')
    .description('run a reflector service process (hosts the TTL sweep)')
    .addOption(concurrency())
    .action(async (o) => {
      catchStartSignals();
      const [{ main }, { loadConfig }] = await Promise.all([
        import('../../services/reflector/main.ts'),
        import('../../shared/runtime/config.ts'),
      ]);
      const cfg = loadConfig();
      await main(cfg, { concurrency: o.concurrency ?? cfg.concurrency });
    });
  program
    .command('worker')
    .description('run a subagent worker process for one role')
    .requiredOption('--role <role>', 'the role this worker serves')
    .addOption(concurrency())
    .action(async (o) => {
      catchStartSignals();
      const [{ main }, { loadConfig }] = await Promise.all([
        import('../../services/subagent-worker/main.ts'),
        import('../../shared/runtime/config.ts'),
      ]);
      const cfg = loadConfig();
      await main(cfg, { role: o.role, concurrency: o.concurrency ?? cfg.concurrency });
    });
  registerUp(program);
}

const DEFAULT_PORT_BASE = 9464;

function registerUp(program: Command): void {
  program
    .command('up')
    .description('start planner, reflector and one worker per role as child processes')
    .option(
      '--metrics-port-base <port>',
      'first metrics port; each child takes the next one (default: METRICS_PORT, else 9464)',
      int('--metrics-port-base', 0),
    )
    .option(
      '--replicas <n>',
      `worker processes per role (at most ${MAX_REPLICAS})`,
      int('--replicas', 1, MAX_REPLICAS),
      1,
    )
    .action(async (o) => up(o.metricsPortBase, o.replicas));
}

/** Starts the children and stops them all on SIGINT or SIGTERM, exiting 1 if any failed. */
async function up(portBase: number | undefined, replicas: number): Promise<void> {
  const { loadConfig } = await import('../../shared/runtime/config.ts');
  const cfg = loadConfig();
  if (cfg.providerNotice) print(cfg.providerNotice);
  if (cfg.envNotice) print(cfg.envNotice);
  let sup: Supervisor | undefined;
  let stopRedisCheck = () => {};
  let stopping = false;
  let exitCode = 0;
  const stop = () => {
    // A second signal while draining stops at once (one stop already runs: it reports).
    if (stopping) return sup && stopNow(sup, cfg);
    stopping = true;
    stopRedisCheck();
    if (!sup) process.exit(exitCode);
    const upTo = Math.round(cfg.drainTimeoutMs / 1000);
    print(
      `deepq up: stopping all services: each finishes its running jobs first (up to ${upTo} s); Ctrl-C again stops now`,
    );
    sup.stop(cfg.drainTimeoutMs + 5000).then((codes) => {
      const bad = [...codes].filter(([, code]) => code !== 0);
      for (const [name, code] of codes) {
        print(`deepq up: ${name} exited ${code === 0 ? 'cleanly' : `with ${code ?? 'a signal'}`}`);
      }
      process.exit(exitCode || (bad.length ? 1 : 0));
    });
  };
  // Before the port lines and any child: a signal with no listener yet would kill this process alone.
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  const specs = childSpecs(cfg, portBase, replicas);
  sup = supervise(specs, {
    onGiveUp(name, reason, code) {
      print(`deepq up: ${name} is not restarted: ${reason} (see its output above)`);
      exitCode = code === CONFIG_ERROR_EXIT ? CONFIG_ERROR_EXIT : 1;
      stop();
    },
  });
  const { tellWhileRedisAway } = await import('../up-redis-check.ts');
  if (!stopping) stopRedisCheck = await tellWhileRedisAway(cfg.redisUrl, print);
}

/** The children `up` starts, each port printed; ports past 65535 refused up front. */
function childSpecs(cfg: Config, portBase: number | undefined, replicas: number): ChildSpec[] {
  // A service's own port is 0 (any free one) by default; `up` prints fixed ones unless told.
  const metricsPortBase = portBase ?? (process.env.METRICS_PORT ? cfg.metricsPort : DEFAULT_PORT_BASE);
  const specs = planChildren(
    cfg.roles.map((r) => r.name),
    metricsPortBase,
    replicas,
  );
  const last = specs[specs.length - 1]!.port;
  if (last > 65535)
    throw new ValidationError(`--metrics-port-base ${metricsPortBase}: its children need ports up to ${last}`);
  const shown = (port: number) =>
    port === 0
      ? "a free port (its log's 'started' line gives it as metricsPort)"
      : reachableUrl(cfg.metricsHost, port, '/metrics');
  for (const s of specs) print(`deepq up: ${s.name.padEnd(28)} metrics ${shown(s.port)}`);
  return specs;
}

let stoppedNow = false;

/** Ctrl-C twice: the children still draining are killed; their jobs run again once found stalled. */
function stopNow(sup: Supervisor, cfg: Config): void {
  if (stoppedNow) return;
  stoppedNow = true;
  const draining = [...sup.children].filter(([, c]) => c.exitCode === null && c.signalCode === null);
  if (!draining.length) return;
  const within = Math.round((cfg.lockDurationMs + cfg.stalledIntervalMs) / 1000);
  const names = draining.map(([name]) => name).join(', ');
  print(`deepq up: stopping now: ${names}; their running jobs run again once found stalled (within ${within} s)`);
  for (const [, c] of draining) c.kill('SIGKILL');
}
