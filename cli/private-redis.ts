// A private redis-server on a free port, for tests, the demo and the benchmark: the shared
// Redis on 6379 is never touched or flushed.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
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
  /** Stops and starts the server on the same port and data dir (AOF restart test). */
  restart(downMs?: number): Promise<void>;
}

export async function startPrivateRedis(opts: { appendonly?: boolean; password?: string } = {}): Promise<PrivateRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'deepq-redis-'));
  const args = [
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
  const launch = async () => {
    const proc = spawn('redis-server', args, { stdio: 'ignore' });
    const deadline = Date.now() + 10_000;
    while (!(await portAnswers(port))) {
      if (proc.exitCode !== null) throw new Error(`redis-server exited with code ${proc.exitCode}`);
      if (Date.now() > deadline) throw new Error('redis-server did not start within 10 s');
      await new Promise((r) => setTimeout(r, 25));
    }
    return proc;
  };
  const kill = async (proc: ChildProcess) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      proc.once('exit', () => resolve());
      proc.kill('SIGTERM');
    });
  };
  const auth = opts.password ? `:${encodeURIComponent(opts.password)}@` : '';
  const handle: PrivateRedis = {
    url: `redis://${auth}127.0.0.1:${port}`,
    port,
    dir,
    proc: await launch(),
    async stop() {
      await kill(handle.proc);
      rmSync(dir, { recursive: true, force: true });
    },
    async restart(downMs = 500) {
      await kill(handle.proc);
      await new Promise((r) => setTimeout(r, downMs));
      handle.proc = await launch();
    },
  };
  return handle;
}
