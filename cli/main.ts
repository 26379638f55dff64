// The deepq CLI: service commands, the producer commands, `up` and `demo`. Wiring only.
import { Command, InvalidArgumentError, Option } from 'commander';
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { loadConfig, redactUrl, type Config } from '../shared/runtime/config.ts';
import { createRedis } from '../shared/runtime/redis.ts';
import type { Redis } from 'ioredis';
import { GoalClient, estimateCost } from '../shared/goal/client.ts';
import { totalTokens } from '../shared/goal/store.ts';
import { isTerminal } from '../shared/goal/status.ts';
import { TimelineView, formatEventLine } from './timeline.ts';
import { planChildren, supervise } from './supervisor.ts';
import { createRuntime } from '../shared/runtime/runtime.ts';
import { loadTranscript } from '../shared/agent/transcripts.ts';
import { runDemo } from './demo.ts';
import { scrubSecrets } from '../shared/runtime/logger.ts';
import { artifactNameProblem } from '../shared/vfs/artifact-name.ts';

function int(name: string, min = 1) {
  return (v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}`);
    return n;
  };
}
function num(name: string) {
  return (v: string) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a positive number`);
    return n;
  };
}

/** How long a CLI command waits for its first Redis connection before saying so. */
const CONNECT_TIMEOUT_MS = 10_000;
const PERMANENT_CONNECT_ERROR = /WRONGPASS|NOAUTH|invalid password|certificate|self[- ]signed|ERR_TLS|CERT_|UNABLE_TO_VERIFY|altnames/i;

/**
 * Resolves once the connection is ready; rejects with an error naming the (redacted) URL and
 * the last connection error when it is not within the timeout. Without this a CLI command
 * would wait forever, silently, on a wrong host, port, password or TLS setting.
 */
async function connected(redis: Redis, url: string, timeoutMs = CONNECT_TIMEOUT_MS): Promise<void> {
  if (redis.status === 'ready') return;
  let last = '';
  let onError: (err: Error) => void = () => {};
  try {
    await new Promise<void>((resolve, reject) => {
      const fail = () => reject(new Error(`cannot connect to Redis at ${redactUrl(url)}${last ? `: ${last}` : ''}`));
      const t = setTimeout(() => {
        last = `no connection within ${timeoutMs / 1000} s${last ? ` (${last})` : ''}`;
        fail();
      }, timeoutMs);
      t.unref();
      onError = (err: Error) => {
        last = err.message;
        // A refused connection may be a Redis still starting; a wrong password or an
        // untrusted certificate will not get better by waiting.
        if (PERMANENT_CONNECT_ERROR.test(`${err.message} ${(err as NodeJS.ErrnoException).code ?? ''}`)) {
          clearTimeout(t);
          fail();
        }
      };
      redis.on('error', onError);
      redis.once('ready', () => {
        clearTimeout(t);
        resolve();
      });
    });
  } finally {
    redis.off('error', onError);
  }
}

let clientRef: GoalClient | undefined;
async function client(): Promise<GoalClient> {
  if (!clientRef) {
    const cfg = loadConfig();
    clientRef = new GoalClient(cfg, createRedis(cfg.redisUrl, 'deepq:cli'));
  }
  await connected(clientRef.redis, clientRef.cfg.redisUrl);
  return clientRef;
}
const print = (s: string) => process.stdout.write(s + '\n');

async function follow(c: GoalClient, goalId: string, mode: 'tree' | 'lines' | 'none'): Promise<string> {
  const view = new TimelineView();
  let last = '-';
  let t0 = 0;
  let drawn = 0;
  for (;;) {
    const batch = await c.goals.events(goalId, last);
    for (const { id, event } of batch) {
      last = id;
      if (!t0) t0 = event.at;
      view.apply(event);
      if (mode === 'lines') print(formatEventLine(event, t0));
    }
    const g = await c.get(goalId);
    if (mode === 'tree' && (batch.length || !drawn)) {
      const text = view.render();
      if (drawn) process.stdout.write(`\x1b[${drawn}F\x1b[J`);
      process.stdout.write(text + '\n');
      drawn = text.split('\n').length;
    }
    if (isTerminal(g.status) || g.status === 'awaiting_human') {
      const rest = await c.goals.events(goalId, last);
      for (const { event } of rest) {
        view.apply(event);
        if (mode === 'lines') print(formatEventLine(event, t0 || event.at));
      }
      if (mode === 'tree' && rest.length) {
        if (drawn) process.stdout.write(`\x1b[${drawn}F\x1b[J`);
        process.stdout.write(view.render() + '\n');
      }
      return g.status;
    }
    await new Promise((r) => setTimeout(r, 150));
  }
}

export function buildProgram(): Command {
  const program = new Command();
  program
    .name('deepq')
    .description('Run deep agents (planner → parallel subagents → reflector) on BullMQ and Redis.')
    .showHelpAfterError('(run deepq --help for usage)')
    .configureOutput({ outputError: (str, write) => write(scrubSecrets(str)) });

  const concurrency = () => new Option('--concurrency <n>', 'jobs this process runs at once (default: config concurrency, 8)').argParser(int('--concurrency'));

  program.command('planner').description('run a planner service process').addOption(concurrency()).action(async (o) => {
    const { main } = await import('../services/planner/main.ts');
    const cfg = loadConfig();
    await main(cfg, { concurrency: o.concurrency ?? cfg.concurrency });
  });
  program.command('reflector').description('run a reflector service process (hosts the TTL sweep)').addOption(concurrency()).action(async (o) => {
    const { main } = await import('../services/reflector/main.ts');
    const cfg = loadConfig();
    await main(cfg, { concurrency: o.concurrency ?? cfg.concurrency });
  });
  program.command('worker').description('run a subagent worker process for one role').requiredOption('--role <role>', 'the role this worker serves').addOption(concurrency()).action(async (o) => {
    const { main } = await import('../services/subagent-worker/main.ts');
    const cfg = loadConfig();
    await main(cfg, { role: o.role, concurrency: o.concurrency ?? cfg.concurrency });
  });

  program
    .command('up')
    .description('start planner, reflector and one worker per role as child processes')
    .option('--metrics-port-base <port>', 'first metrics port; each child takes the next one', int('--metrics-port-base', 0), 9464)
    .option('--replicas <n>', 'worker processes per role', int('--replicas'), 1)
    .action(async (o) => {
      const cfg = loadConfig();
      if (cfg.providerNotice) print(cfg.providerNotice);
      const specs = planChildren(cfg.roles.map((r) => r.name), o.metricsPortBase, o.replicas);
      for (const s of specs) print(`deepq up: ${s.name.padEnd(28)} metrics http://127.0.0.1:${s.port}/metrics`);
      const sup = supervise(specs);
      let stopping = false;
      const stop = () => {
        if (stopping) return;
        stopping = true;
        print('deepq up: stopping all services…');
        sup.stop(cfg.drainTimeoutMs + 5000).then((codes) => {
          const bad = [...codes].filter(([, code]) => code !== 0);
          for (const [name, code] of codes) print(`deepq up: ${name} exited ${code === 0 ? 'cleanly' : `with ${code ?? 'a signal'}`}`);
          process.exit(bad.length ? 1 : 0);
        });
      };
      process.on('SIGINT', stop);
      process.on('SIGTERM', stop);
    });

  program
    .command('enqueue')
    .description('submit a goal; prints its id')
    .argument('<goal>', 'the goal text')
    .option('--wait', 'wait until the goal is terminal; exit 0 only when it is done')
    .option('--json', 'print the status object as the last line')
    .option('--review', 'pause in awaiting_human after every reflection')
    .option('--max-tokens <n>', 'token budget', int('--max-tokens'))
    .option('--max-steps <n>', 'cycle budget', int('--max-steps'))
    .option('--max-seconds <n>', 'wall-clock budget', num('--max-seconds'))
    .action(async (goal: string, o) => {
      const c = await client();
      const goalId = await c.enqueue({ goal, review: !!o.review, budgets: { maxTokens: o.maxTokens, maxSteps: o.maxSteps, maxSeconds: o.maxSeconds } });
      if (!o.json || !o.wait) print(goalId);
      let status = 'queued';
      if (o.wait) status = await follow(c, goalId, o.json ? 'none' : process.stdout.isTTY ? 'tree' : 'lines');
      if (o.json) print(JSON.stringify(await c.summary(goalId)));
      process.exitCode = o.wait && status !== 'done' ? 1 : 0;
    });

  program
    .command('status')
    .description('show a goal: status, step, tokens, estimated cost')
    .argument('<goalId>')
    .option('--json', 'print the status object')
    .action(async (goalId: string, o) => {
      const c = await client();
      const s = await c.summary(goalId);
      if (o.json) { print(JSON.stringify(s)); return; }
      const g = await c.get(goalId);
      print(`goal      ${g.goalId}: ${g.goal.slice(0, 100)}`);
      print(`status    ${g.status}${g.reason ? ` (${g.reason})` : ''}`);
      print(`step      ${g.step} (depth ${g.depth})`);
      print(`tokens    ${totalTokens(g.tokens)} (input ${g.tokens.input}, output ${g.tokens.output}, cache read ${g.tokens.cache_read}, cache write ${g.tokens.cache_write})`);
      for (const [k, u] of Object.entries(g.usage)) print(`  ${k.replace('|', ' @ ').padEnd(44)} in ${u.input} out ${u.output} cache r/w ${u.cache_read}/${u.cache_write}`);
      print(`cost      ~$${estimateCost(g, c.cfg.prices).toFixed(4)}`);
      print(`artifacts ${s.artifacts.join(', ') || '(none)'}`);
      print(`created   ${new Date(g.createdAt).toISOString()}${g.finishedAt ? `  finished ${new Date(g.finishedAt).toISOString()}` : ''}`);
    });

  program.command('watch').description('follow a goal live until it is terminal').argument('<goalId>').action(async (goalId: string) => {
    const c = await client();
    await c.get(goalId);
    const status = await follow(c, goalId, process.stdout.isTTY ? 'tree' : 'lines');
    process.exitCode = status === 'done' ? 0 : 1;
  });

  program
    .command('artifacts')
    .description("list a goal's artifacts, or write each to DIR")
    .argument('<goalId>')
    .option('--out <dir>', 'write each artifact into this directory')
    .action(async (goalId: string, o) => {
      const c = await client();
      const files = await c.artifacts(goalId);
      for (const f of files) {
        if (o.out) {
          if (artifactNameProblem(f.name)) continue;
          const path = resolve(o.out, f.name);
          await mkdir(dirname(path), { recursive: true });
          await writeFile(path, (await c.read(goalId, f.name)) ?? '');
          print(`${join(o.out, f.name)}  (${f.bytes} bytes)`);
        } else {
          print(`${f.name.padEnd(32)} ${f.status.padEnd(7)} ${String(f.bytes).padStart(9)} B  step ${f.step}  ${f.role ?? ''}  v${f.version}`);
        }
      }
      if (!files.length) print('(no artifacts)');
    });

  program.command('cancel').description('cancel a goal across all processes').argument('<goalId>').action(async (goalId: string) => {
    const r = await (await client()).cancel(goalId);
    print(r.cancelled ? `cancelled ${goalId}` : `goal ${goalId} is already ${r.status}`);
  });

  program
    .command('resume')
    .description('carry on a goal awaiting a human')
    .argument('<goalId>')
    .option('--note <text>', 'a note for the planner (always re-plans)')
    .action(async (goalId: string, o) => {
      const r = await (await client()).resume(goalId, o.note);
      print(`resumed ${goalId}: ${r.action} (status ${r.status})`);
    });

  program
    .command('goals')
    .description('list goals')
    .option('--status <status>', 'only goals in this status')
    .option('--json', 'print JSON')
    .action(async (o) => {
      const rows = await (await client()).list(o.status);
      if (o.json) { print(JSON.stringify(rows)); return; }
      print(`${'GOAL'.padEnd(14)}${'STATUS'.padEnd(16)}${'STEP'.padEnd(6)}${'TOKENS'.padEnd(10)}${'COST'.padEnd(10)}${'AGE'.padEnd(8)}TEXT`);
      for (const r of rows) print(`${r.goalId.padEnd(14)}${r.status.padEnd(16)}${String(r.step).padEnd(6)}${String(r.tokens).padEnd(10)}${('$' + r.costUsd.toFixed(4)).padEnd(10)}${(r.ageSeconds + 's').padEnd(8)}${r.goal}`);
    });

  program.command('transcript').description("show an agent run's transcript by thread id").argument('<threadId>').action(async (threadId: string) => {
    const cfg: Config = loadConfig();
    const rt = createRuntime({ ...cfg, logLevel: 'silent' }, 'cli');
    try {
      await connected(rt.redis, cfg.redisUrl);
      const t = await loadTranscript(rt, threadId);
      if (!t) throw new Error(`no transcript for thread id ${threadId} (unknown, or expired after its TTL)`);
      print(JSON.stringify(t, null, 2));
    } finally {
      await rt.close();
    }
  });

  program
    .command('demo')
    .description('run one goal end to end with every service as its own process')
    .argument('[goal]', 'the goal text', 'Write a function that sorts a list of numbers, with a short research note')
    .action(async (goal: string) => {
      process.exitCode = await runDemo(goal);
    });

  return program;
}

async function run(): Promise<void> {
  let failed = false;
  try {
    await buildProgram().parseAsync(process.argv);
  } catch (err) {
    const e = err as Error;
    process.stderr.write(`deepq: error: ${scrubSecrets(e.message)}\n`);
    if (process.env.DEEPQ_DEBUG) process.stderr.write(`${e.stack}\n`);
    process.exitCode = e.name === 'ConfigError' ? 78 : 1;
    failed = true;
  } finally {
    await clientRef?.close();
  }
  // A service that failed to start (e.g. Redis refused its password) may still hold open
  // connections and its ops server: exit rather than linger half-started, logging errors.
  if (failed) process.exit();
}

await run();
