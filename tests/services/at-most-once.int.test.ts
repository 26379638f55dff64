// An MCP tool the server marks neither read-only nor idempotent runs at most once: its call is
// marked started in the job's checkpoint before it goes out, and a worker SIGKILLed while the
// call runs leaves the next worker a run that does not make it again: the model reads that its
// outcome is unknown. A read-only tool's call cut short runs again. The real server-everything
// over stdio (toggle-simulated-logging, not idempotent: a second call turns logging off again;
// echo, read-only), its process stopped (SIGSTOP) so that the call hangs while the worker dies.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import type { TimelineEvent } from '../../shared/goal/events.ts';
import { subtaskJobId } from '../../shared/runtime/queues.ts';
import { anthropicEnv } from '../../testing/agent-harness.ts';
import { type Fleet, type ServiceProc, startFleet, stopProcess } from '../../testing/fleet.ts';
import {
  firstUserText,
  type MessagesApiServer,
  startMessagesApiServer,
  systemText,
  text,
  toolUse,
} from '../../testing/messages-api-server.ts';
import { useRedis } from '../../testing/redis.ts';
import { until } from '../../testing/until.ts';
import {
  EVERYTHING_ENTRY,
  everythingStdio,
  goalFor,
  lastResults,
  scriptedModel,
  writeConfig,
} from '../agent/mcp-harness.ts';

const ROLE = 'operator';
const TOGGLE = 'mcp__everything__toggle-simulated-logging';

const model = scriptedModel({
  once: ({ turn, results }) =>
    turn === 0 ? toolUse(TOGGLE, {}) : text(`once: ${results[0]?.is_error ? 'unknown' : 'toggled'}`),
  again: ({ turn, results }) =>
    turn === 0 ? toolUse('mcp__everything__echo', { message: 'again' }) : text(`again: ${results[0]?.content}`),
});

const redis = useRedis();
let server: MessagesApiServer;
let fleet: Fleet;
before(async () => {
  await redis.ready;
  server = await startMessagesApiServer({ handler: model });
  const tools = ['mcp:everything/toggle-simulated-logging', 'mcp:everything/echo'];
  const config = writeConfig({ everything: everythingStdio() }, [{ name: ROLE, tools }]);
  const env = { DEEPQ_CONFIG: config, DEEPQ_LOCK_DURATION_MS: '3000', DEEPQ_STALLED_INTERVAL_MS: '1000' };
  fleet = await startFleet(redis.url, anthropicEnv(server, env), { roles: [ROLE] });
});
after(async () => {
  await fleet?.stop();
  await server?.close();
});

/** Parent pid of each live process, read from /proc. */
function parents(): Map<number, number> {
  const out = new Map<number, number>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      // The command may hold spaces and parentheses: the fields after its closing one are fixed.
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      out.set(Number(d), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/** The pid of the server-everything process a worker runs (its descendant), once it runs. */
async function mcpServerOf(worker: ServiceProc): Promise<number> {
  return until(() => {
    const ppid = parents();
    for (const pid of ppid.keys()) {
      let cmd = '';
      try {
        cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      } catch {
        continue;
      }
      if (!cmd.includes(EVERYTHING_ENTRY)) continue;
      for (let p = ppid.get(pid); p && p > 1; p = ppid.get(p)) if (p === worker.proc.pid) return pid;
    }
    return undefined;
  }, 30_000);
}

/** The subagent's model requests of one scenario: how many messages each sent. */
const turnsAsked = (scenario: string) =>
  server.requests
    .filter(
      (q) => systemText(q.body).includes(`agent ${ROLE}.`) && firstUserText(q.body).includes(`scenario=${scenario}`),
    )
    .map((q) => q.body);

const checkpointOf = (goalId: string) => fleet.client.approvals.checkpoint(goalId, subtaskJobId(goalId, 1, 0));

async function timeline(goalId: string): Promise<TimelineEvent[]> {
  return (await fleet.client.goals.events(goalId)).map((e) => e.event);
}

async function metricOf(port: number, name: string): Promise<number> {
  const body = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const lines = body.split('\n').filter((l) => l.startsWith(`${name}{`));
  return lines.reduce((n, l) => n + Number(l.split(' ').pop()), 0);
}

/**
 * Runs `scenario` with the worker's MCP server stopped, waits for `inFlight`, then SIGKILLs the
 * worker (and its stopped server); a new worker takes the job over. Returns the goal id.
 */
async function killedMidCall(worker: ServiceProc, scenario: string, inFlight: (goalId: string) => Promise<unknown>) {
  const mcp = await mcpServerOf(worker);
  process.kill(mcp, 'SIGSTOP');
  const goalId = await fleet.client.enqueue({ goal: goalFor(ROLE, scenario) });
  await until(() => inFlight(goalId), 30_000);
  await stopProcess(worker, 'SIGKILL');
  process.kill(mcp, 'SIGKILL');
  return goalId;
}

test('an at-most-once call in flight when its worker dies is not made again: the model reads its outcome is unknown', {
  timeout: 90_000,
}, async () => {
  const first = fleet.procs.find((p) => p.name === `worker-${ROLE}`)!;
  // The call is marked started before it goes out.
  const goalId = await killedMidCall(first, 'once', async (id) => (await checkpointOf(id))?.agent.started === 0);
  const second = await fleet.start(`worker-${ROLE}-2`, ['worker', '--role', ROLE]);
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 45_000 });
  assert.equal(g.status, 'done', g.reason ?? '');
  assert.equal(await fleet.client.read(goalId, 'once.md'), 'once: unknown');
  const asked = turnsAsked('once');
  // The first turn was asked once: the second run goes on from the call, not from the task.
  assert.deepEqual(
    asked.map((b) => b.messages.length),
    [1, 3],
  );
  const [result] = lastResults(asked[1]!);
  assert.equal(result?.is_error, true);
  assert.match(String(result?.content), /not run again: .* whether it took effect is unknown/);
  assert.match(String(result?.content), /mcp:everything\/toggle-simulated-logging/);
  assert.equal(await metricOf(second.port, 'deepq_mcp_tool_calls_total'), 0, 'the new worker made the call');
  const events = await timeline(goalId);
  const calls = events.filter((e) => e.type === 'tool_called');
  assert.deepEqual(
    calls.map((e) => e.type === 'tool_called' && [e.tool, e.ok, e.unknown]),
    [['mcp:everything/toggle-simulated-logging', false, true]],
  );
  assert.ok(events.some((e) => e.type === 'subtask_started' && e.restarted));
  assert.equal(await checkpointOf(goalId), null, 'a finished job left its checkpoint');
});

test('a read-only call cut short the same way runs again, and nothing marks it started first', {
  timeout: 90_000,
}, async () => {
  const worker = fleet.procs.find((p) => p.name === `worker-${ROLE}-2`)!;
  const goalId = await killedMidCall(worker, 'again', async (id) => {
    if (turnsAsked('again').length === 0) return false;
    // The model answered turn 0; the echo goes out to the stopped server within moments.
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(await checkpointOf(id), null, 'a read-only call was marked started');
    return true;
  });
  const third = await fleet.start(`worker-${ROLE}-3`, ['worker', '--role', ROLE]);
  const g = await fleet.client.waitFor(goalId, { timeoutMs: 45_000 });
  assert.equal(g.status, 'done', g.reason ?? '');
  assert.equal(await fleet.client.read(goalId, 'again.md'), 'again: Echo: again');
  // No checkpoint before the echo: the run starts over, the first turn asked again.
  assert.deepEqual(
    turnsAsked('again').map((b) => b.messages.length),
    [1, 1, 3],
  );
  assert.equal(await metricOf(third.port, 'deepq_mcp_tool_calls_total'), 1);
});
