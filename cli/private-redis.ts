// A private redis-server on a free port, for tests, the demo and the benchmark: the shared
// Redis on 6379 is never touched or flushed.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** A base port whose next `count` ports are all free right now (deepq up numbers its children's
 *  metrics ports from a base; a single free port says nothing about its neighbours). */
export async function freePortRange(count: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = await freePort();
    if (base + count > 65535) continue;
    const held = await Promise.all(Array.from({ length: count }, (_v, i) => holdPort(base + i)));
    await Promise.all(held.map((srv) => (srv ? new Promise((r) => srv.close(r)) : undefined)));
    if (held.every(Boolean)) return base;
  }
  throw new Error(`no run of ${count} free ports found`);
}

function holdPort(port: number): Promise<ReturnType<typeof createServer> | null> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(null));
    srv.listen(port, '127.0.0.1', () => resolve(srv));
  });
}

export function hasRedisServer(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** True when something accepts a TCP connection on host:port within the timeout. */
export function portAnswers(port: number, host = '127.0.0.1', timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = createConnection({ port, host });
    const done = (ok: boolean) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(timeoutMs, () => done(false));
    sock.once('connect', () => done(true));
    sock.once('error', () => done(false));
  });
}

export interface PrivateRedis {
  url: string;
  port: number;
  dir: string;
  proc: ChildProcess;
  stop(): Promise<void>;
  /** Stops and starts the server on the same port and data dir (AOF restart test), after `down`:
   *  that many ms, or once that promise settles. */
  restart(down?: number | Promise<unknown>): Promise<void>;
}

/** TCP sockets in LISTEN state on this machine, port → socket inodes (Linux /proc/net/tcp and
 *  tcp6); undefined where /proc cannot say. */
export function tcpListeners(): Map<number, string[]> | undefined {
  const listeners = new Map<number, string[]>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      return undefined;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols[3] !== '0A' || !cols[1] || !cols[9]) continue;
      const port = Number.parseInt(cols[1].split(':').pop()!, 16);
      listeners.set(port, [...(listeners.get(port) ?? []), cols[9]]);
    }
  }
  return listeners;
}

/**
 * Whether the process `pid` holds the listening socket on `port` (its inode among the
 * process's fds); undefined where /proc cannot say. Something answering on a port says
 * nothing about whose it is: another test's server may have taken the port first.
 */
export function ownsListener(pid: number, port: number): boolean | undefined {
  const listeners = tcpListeners();
  if (!listeners) return undefined;
  const inodes = listeners.get(port) ?? [];
  if (!inodes.length) return false;
  try {
    return readdirSync(`/proc/${pid}/fd`).some((fd) => {
      const target = readlinkSafe(`/proc/${pid}/fd/${fd}`);
      return target.startsWith('socket:[') && inodes.includes(target.slice(8, -1));
    });
  } catch {
    return undefined;
  }
}

function readlinkSafe(path: string): string {
  try {
    return readlinkSync(path);
  } catch {
    return '';
  }
}

/** Waits until `proc` listens on `port`: 'exited' if it died first (the port was taken
 *  meanwhile, so its bind failed), 'taken' if until the timeout only something else answered. */
export async function awaitOwnListener(
  proc: ChildProcess,
  port: number,
  timeoutMs = 10_000,
): Promise<'ready' | 'exited' | 'taken'> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.exitCode !== null || proc.signalCode !== null) return 'exited';
    if (await portAnswers(port)) {
      const owned = ownsListener(proc.pid!, port);
      if (owned !== false) return 'ready';
      // Someone else's listener: ours will fail its bind and exit, which the next look sees.
      if (Date.now() > deadline) return 'taken';
    }
    if (Date.now() > deadline) throw new Error(`redis-server did not start within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const PORT_ATTEMPTS = 5;

export interface PrivateRedisOptions {
  appendonly?: boolean;
  password?: string;
  /** In a process group of its own, out of reach of a terminal's Ctrl-C (the demo stops it last). */
  ownProcessGroup?: boolean;
}

export async function startPrivateRedis(opts: PrivateRedisOptions = {}): Promise<PrivateRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'deepq-redis-'));
  const args = (port: number) => [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--save',
    '',
    '--appendonly',
    opts.appendonly ? 'yes' : 'no',
    '--maxmemory-policy',
    'noeviction',
    ...(opts.password ? ['--requirepass', opts.password] : []),
  ];
  const launch = async (port: number) => {
    const proc = spawn('redis-server', args(port), { stdio: 'ignore', detached: !!opts.ownProcessGroup });
    const state = await awaitOwnListener(proc, port);
    if (state === 'ready') return proc;
    await kill(proc);
    throw new Error(`redis-server could not listen on port ${port} (${state === 'taken' ? 'taken' : 'exited'})`);
  };
  // A free port can be taken between the check and redis-server's bind (another test file
  // starting its own): then another port, never someone else's server.
  let port = 0;
  let proc: ChildProcess | undefined;
  for (let attempt = 1; !proc; attempt++) {
    port = await freePort();
    proc = await launch(port).catch((err) => {
      if (attempt >= PORT_ATTEMPTS) throw err;
      return undefined;
    });
  }
  const auth = opts.password ? `:${encodeURIComponent(opts.password)}@` : '';
  const handle: PrivateRedis = {
    url: `redis://${auth}127.0.0.1:${port}`,
    port,
    dir,
    proc,
    async stop() {
      await kill(handle.proc);
      rmSync(dir, { recursive: true, force: true });
    },
    async restart(down = 500) {
      await kill(handle.proc);
      await (typeof down === 'number' ? new Promise((r) => setTimeout(r, down)) : down.catch(() => {}));
      handle.proc = await launch(port);
    },
  };
  return handle;
}

async function kill(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    proc.once('exit', () => resolve());
    proc.kill('SIGTERM');
  });
}
