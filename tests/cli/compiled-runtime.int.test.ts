// The compiled runtime (npm run build → dist/) on a copy of the checkout: bin/deepq.mjs runs dist/
// only while it matches the sources exactly (an edit, a new or removed file, or a build that never
// finished makes it run the sources through tsx), `deepq --help` loads none of the heavy modules
// in either mode (traced through the ESM loader), and the image's layout (dist/ without sources)
// finds its Lua scripts and static files. Never uses, nor depends on, the checkout's own dist/.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, renameSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { GoalClient } from '../../cli/goal-client.ts';
import { loadConfig } from '../../shared/runtime/config.ts';
import { createRedis } from '../../shared/runtime/redis.ts';
import { type Checkout, imageLayout, sourceCheckout } from '../../testing/compiled-checkout.ts';
import { testEnv } from '../../testing/fleet.ts';
import { nextFreePort } from '../../testing/ports.ts';
import { useRedis } from '../../testing/redis.ts';

const redis = useRedis();
const TRACE_HOOK = fileURLToPath(new URL('../../testing/import-trace.mjs', import.meta.url));
const traceDir = mkdtempSync(join(tmpdir(), 'deepq-trace-'));
/** What `deepq --help` must never load: every one costs tens of milliseconds or more. */
const HEAVY = [
  'bullmq',
  'ioredis',
  '@anthropic-ai/sdk',
  'openai',
  'hono',
  '@hono/node-server',
  '@bull-board/api',
  '@modelcontextprotocol/sdk',
  'pino',
  'prom-client',
  'zod',
  'yaml',
];
const FROM_DIST = /deepq: running the build in dist\//;

let checkout: Checkout;
let traces = 0;

before(async () => {
  await redis.ready;
  checkout = sourceCheckout();
  checkout.build();
});
after(() => {
  checkout?.remove();
  rmSync(traceDir, { recursive: true, force: true });
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Every module URL the process loaded. */
  loaded: string[];
  packages: Set<string>;
}

/** Runs `deepq <args>` from a checkout with DEEPQ_DEBUG, tracing what it loads. */
function deepq(bin: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
  const trace = join(traceDir, `trace-${++traces}`);
  writeFileSync(trace, '');
  const fullEnv = { PATH: process.env.PATH, HOME: process.env.HOME, ...env, DEEPQ_DEBUG: '1' };
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, ['--import', TRACE_HOOK, bin, ...args], {
      env: { ...fullEnv, DEEPQ_IMPORT_TRACE: trace },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d) => (stdout += d));
    proc.stderr.on('data', (d) => (stderr += d));
    proc.on('exit', (code) => {
      const loaded = readFileSync(trace, 'utf8').split('\n').filter(Boolean);
      const packages = new Set(loaded.map((u) => /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(u)?.[1] ?? ''));
      packages.delete('');
      resolve({ code, stdout, stderr, loaded, packages });
    });
  });
}

const url = (root: string, rel: string) => `file://${join(root, rel)}`;

function assertLean(r: Run, what: string): void {
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /Usage: deepq/);
  // The trace sees packages (so an empty result below means something).
  assert.ok(r.packages.has('commander'), `${what}: the trace saw commander: ${[...r.packages]}`);
  const heavy = HEAVY.filter((p) => r.packages.has(p));
  assert.deepEqual(heavy, [], `${what}: deepq --help loaded ${heavy.join(', ')}`);
}

describe('bin/deepq.mjs and the build stamp', () => {
  test('a fresh build runs from dist/, and --help loads none of the heavy modules', async () => {
    const r = await deepq(checkout.bin, ['--help']);
    assert.match(r.stderr, FROM_DIST);
    assert.ok(r.loaded.includes(url(checkout.root, 'dist/cli/main.js')), 'dist/cli/main.js loaded');
    assert.ok(!r.loaded.some((u) => u.endsWith('.ts')), 'no TypeScript loaded');
    assertLean(r, 'compiled');
  });

  test('a source edited after the build: the sources run through tsx, lean too; a rebuild is used', async () => {
    const later = new Date(Date.now() + 60_000);
    utimesSync(join(checkout.root, 'shared/errors.ts'), later, later);
    try {
      const r = await deepq(checkout.bin, ['--help']);
      assert.match(r.stderr, /running the sources through tsx: shared\/errors\.ts changed since the build/);
      assert.ok(r.loaded.includes(url(checkout.root, 'cli/main.ts')), 'cli/main.ts loaded');
      assert.ok(!r.loaded.some((u) => u.startsWith(url(checkout.root, 'dist/'))), 'nothing of dist/ loaded');
      assertLean(r, 'from the sources');
    } finally {
      checkout.build();
    }
    assert.match((await deepq(checkout.bin, ['--help'])).stderr, FROM_DIST);
  });

  test('a new or a removed source, or a build that did not finish, is never run', async () => {
    const extra = join(checkout.root, 'shared/extra.ts');
    writeFileSync(extra, 'export const x = 1;\n');
    assert.match((await deepq(checkout.bin, ['--help'])).stderr, /shared\/extra\.ts is new since the build/);
    rmSync(extra);
    const css = join(checkout.root, 'services/ui/static/ui.css');
    renameSync(css, join(traceDir, 'ui.css'));
    assert.match((await deepq(checkout.bin, ['--help'])).stderr, /ui\.css was removed since the build/);
    renameSync(join(traceDir, 'ui.css'), css);
    const stamp = join(checkout.root, 'dist/build-stamp.json');
    renameSync(stamp, `${stamp}.moved`);
    assert.match((await deepq(checkout.bin, ['--help'])).stderr, /there is no complete build/);
    renameSync(`${stamp}.moved`, stamp);
    // Back to exactly the sources it was built from: used again.
    assert.match((await deepq(checkout.bin, ['--help'])).stderr, FROM_DIST);
  });

  test('deepq status reads a goal without loading BullMQ, a model SDK, the logger or the web stack', async () => {
    const env = testEnv(redis.url);
    const producer = new GoalClient(loadConfig(env), createRedis(redis.url, 'deepq:test'));
    try {
      const goalId = await producer.enqueue({ goal: 'A goal for a lean status' });
      const r = await deepq(checkout.bin, ['status', goalId], env);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, new RegExp(`^goal {6}${goalId}: A goal for a lean status$`, 'm'));
      assert.match(r.stdout, /^status {4}queued$/m);
      assert.ok(r.packages.has('ioredis'), `the trace saw the Redis client: ${[...r.packages]}`);
      // Redis, and the config's parser and schema, it needs.
      const needed = new Set(['ioredis', 'zod', 'yaml']);
      const heavy = HEAVY.filter((p) => !needed.has(p) && r.packages.has(p));
      assert.deepEqual(heavy, [], `deepq status loaded ${heavy.join(', ')}`);
    } finally {
      await producer.close();
    }
  });

  test('the trace catches what a command imports on demand (control)', async () => {
    const r = await deepq(checkout.bin, ['planner'], { DEEPQ_CONFIG: join(traceDir, 'missing.yaml') });
    assert.equal(r.code, 78, r.stderr);
    assert.ok(r.packages.has('bullmq') && r.packages.has('zod'), `planner loaded ${[...r.packages]}`);
  });
});

describe("the image's layout: dist/ without the sources", () => {
  let image: Checkout;
  before(() => {
    image = imageLayout(checkout);
  });
  after(() => image?.remove());

  test('runs dist/; Lua scripts and the inspector static files are found; a service gets ready', async () => {
    const env = testEnv(redis.url);
    const help = await deepq(image.bin, ['--help']);
    assert.match(help.stderr, FROM_DIST);
    assertLean(help, 'image');
    // enqueue runs the goalCreate Lua script, read beside the compiled module.
    const enq = await deepq(image.bin, ['enqueue', 'compiled goal', '--json'], env);
    assert.equal(enq.code, 0, enq.stderr);
    const goalId = JSON.parse(enq.stdout.trim().split('\n').at(-1)!).goalId;
    const st = await deepq(image.bin, ['status', goalId], env);
    assert.match(st.stdout, /status\s+queued/);
    await withServer(image.bin, ['ui', '--port', '0'], env, async (out) => {
      const base = /open (http:\S+)/.exec(await out(/open http:\S+\n/))![1]!.replace(/\/$/, '');
      const res = await fetch(`${base}/static/goal-live.mjs`);
      assert.equal(res.status, 200);
      const source = readFileSync(join(checkout.root, 'services/ui/static/goal-live.mjs'), 'utf8');
      assert.equal(await res.text(), source);
    });
    await withServer(image.bin, ['planner'], env, async (_out, port) => {
      for (let i = 0; ; i++) {
        const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
          (r) => r.ok,
          () => false,
        );
        if (ok) break;
        assert.ok(i < 400, 'the compiled planner is ready within 20 s');
        await new Promise((r) => setTimeout(r, 50));
      }
    });
    // `deepq up` from dist/ starts its children through bin/deepq.mjs, which is there.
    const sup = await import(url(image.root, 'dist/cli/supervisor.js'));
    assert.equal(sup.BIN, image.bin);
  });
});

/** Runs a long-lived command, hands `fn` a wait for its output and its metrics port, then stops it. */
async function withServer(
  bin: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  fn: (out: (re: RegExp) => Promise<string>, port: number) => Promise<void>,
): Promise<void> {
  const port = nextFreePort();
  const proc = spawn(process.execPath, [bin, ...args], {
    env: { ...env, METRICS_PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let all = '';
  proc.stdout.on('data', (d) => (all += d));
  proc.stderr.on('data', (d) => (all += d));
  const out = async (re: RegExp) => {
    for (let i = 0; !re.test(all); i++) {
      assert.ok(i < 400 && proc.exitCode === null, `deepq ${args.join(' ')}: no ${re} in:\n${all}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    return all;
  };
  try {
    await fn(out, port);
  } finally {
    proc.kill('SIGTERM');
    if (proc.exitCode === null) await new Promise((r) => proc.once('exit', r));
  }
}
