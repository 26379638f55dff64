// Network and Redis faults on top of the chaos loop's SIGKILLs: the fleet talks to Redis
// through a fault proxy that drops the reply to one of deepq's scripts (the hand-offs: goal
// creation and transitions, artifact writes and evictions) now and then, cuts every
// connection now and then, and Redis itself may be restarted once mid-run.
import { type FaultProxy, type ProxiedCommand, startFaultProxy } from './fault-proxy.ts';
import { prng } from './prng.ts';

export interface FaultOptions {
  /** Arm one dropped reply this often (0: never). */
  dropEveryMs: number;
  /** Cut every connection this often (0: never). */
  cutEveryMs: number;
  /** Restart Redis once, this long after the start, down for `restartDownMs` (needs AOF). */
  restartAtMs?: number;
  restartDownMs?: number;
}

export interface FaultCounts {
  drops: number;
  cuts: number;
  redisRestarts: number;
}

export interface FaultLoop {
  proxy: FaultProxy;
  counts: FaultCounts;
  /** Starts injecting (once the fleet is up: the restart time counts from here). */
  begin(): void;
  /** Stops injecting (the proxy keeps forwarding until close). */
  stop(): Promise<void>;
  close(): Promise<void>;
}

/** deepq's own scripts: every key of theirs is under `<prefix>:goal:`. */
const isDeepqScript = (c: ProxiedCommand) =>
  (c.name === 'EVALSHA' || c.name === 'EVAL') && (c.args[2] ?? '').includes(':goal:');

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startFaults(
  redisUrl: string,
  opts: FaultOptions & { seed: number; restart?: (downMs: number) => Promise<void>; log?: (s: string) => void },
): Promise<FaultLoop> {
  const target = new URL(redisUrl);
  const proxy = await startFaultProxy({ host: target.hostname, port: Number(target.port) });
  const counts: FaultCounts = { drops: 0, cuts: 0, redisRestarts: 0 };
  const rand = prng(opts.seed ^ 0x5eed);
  let stopping = false;
  let armed: ReturnType<FaultProxy['dropReplyOnce']> | undefined;
  const every = async (ms: number, act: () => void | Promise<void>) => {
    if (!ms) return;
    while (!stopping) {
      await sleep(ms * (0.5 + rand()));
      if (!stopping) await act();
    }
  };
  const drop = () => {
    if (armed) return;
    const handle = proxy.dropReplyOnce(isDeepqScript);
    armed = handle;
    handle.then(
      () => counts.drops++,
      () => {},
    );
    handle.finally(() => (armed = undefined)).catch(() => {});
  };
  const restart = async () => {
    if (opts.restartAtMs === undefined || !opts.restart) return;
    await sleep(opts.restartAtMs);
    if (stopping) return;
    opts.log?.(`chaos: restarting Redis (down ${opts.restartDownMs ?? 2000} ms)`);
    await opts.restart(opts.restartDownMs ?? 2000);
    counts.redisRestarts++;
  };
  const cut = () => {
    if (proxy.cutAll() > 0) counts.cuts++;
  };
  let loops: Promise<void>[] = [];
  return {
    proxy,
    counts,
    begin() {
      loops = [every(opts.dropEveryMs, drop), every(opts.cutEveryMs, cut), restart()];
    },
    async stop() {
      stopping = true;
      armed?.cancel();
      await Promise.all(loops);
    },
    close: () => proxy.close(),
  };
}
