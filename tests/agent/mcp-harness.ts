// Shared by the tests/agent/mcp-*.int.test.ts files: the real MCP reference server
// (@modelcontextprotocol/server-everything, a devDependency) over stdio and streamable HTTP, a
// config file with MCP roles, and a model (on the local Messages-API server) that plans one
// subtask per goal and plays a per-scenario script in the subagent's conversation.
import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, request, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { type ConnectionOptions, McpConnection } from '../../shared/agent/mcp/connection.ts';
import {
  firstUserText,
  goalOf,
  type Handler,
  type MessageReply,
  type MessagesBody,
  type RawReply,
  roleOf,
  text,
  type WireBlock,
  type WireToolResult,
} from '../../testing/messages-api-server.ts';
import { tempDir } from '../../testing/temp-dir.ts';

/** The server's launcher: `node <entry> stdio` or `PORT=<p> node <entry> streamableHttp`. */
export const EVERYTHING_ENTRY = createRequire(import.meta.url).resolve(
  '@modelcontextprotocol/server-everything/dist/index.js',
);

/** A stdio `mcpServers` entry running server-everything under this Node. */
export function everythingStdio(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { type: 'stdio', command: process.execPath, args: [EVERYTHING_ENTRY, 'stdio'], ...extra };
}

export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const { port } = srv.address() as AddressInfo;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

export interface EverythingHttp {
  proc: ChildProcess;
  port: number;
  url: string;
  stop(): Promise<void>;
}

/** server-everything over streamable HTTP on `port`, once it listens. */
export async function startEverythingHttp(port: number): Promise<EverythingHttp> {
  const proc = spawn(process.execPath, [EVERYTHING_ENTRY, 'streamableHttp'], {
    env: { PATH: process.env.PATH, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`server-everything (http) did not start:\n${err}`)), 15_000);
    proc.stderr!.on('data', (d) => {
      err += d;
      if (err.includes('listening on port')) {
        clearTimeout(t);
        resolve();
      }
    });
    proc.once('exit', (code) => reject(new Error(`server-everything (http) exited ${code}:\n${err}`)));
  });
  const stop = () =>
    new Promise<void>((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
      proc.once('exit', () => resolve());
      proc.kill('SIGKILL');
    });
  return { proc, port, url: `http://127.0.0.1:${port}/mcp`, stop };
}

/** How a test proxy answers: the upstream response `up` for the request `req`, to `res`. */
export type ProxyAnswer = (req: IncomingMessage, up: IncomingMessage, res: ServerResponse) => void;

/** Passes the upstream response on as it is. */
export const passThrough: ProxyAnswer = (_req, up, res) => {
  res.writeHead(up.statusCode ?? 502, up.headers);
  up.pipe(res);
};

/**
 * An HTTP proxy in front of a real server on `target`: each request goes on after `delayMs()`
 * (0 by default), seen first by `onRequest`; `answer` passes the response back (as it is by default).
 */
export async function testProxy(
  target: number,
  opts: { onRequest?: (req: IncomingMessage) => void; delayMs?: () => number; answer?: ProxyAnswer } = {},
): Promise<number> {
  const srv = createServer((req, res) => {
    opts.onRequest?.(req);
    setTimeout(() => {
      const forward = { host: '127.0.0.1', port: target, path: req.url, method: req.method, headers: req.headers };
      const up = request(forward, (r) => (opts.answer ?? passThrough)(req, r, res));
      up.on('error', () => res.destroy());
      req.pipe(up);
    }, opts.delayMs?.() ?? 0);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  srv.unref();
  return (srv.address() as AddressInfo).port;
}

/** A plain HTTP proxy in front of a server that records each request's headers. */
export async function headerRecorder(target: number): Promise<{ port: number; seen: Record<string, string>[] }> {
  const seen: Record<string, string>[] = [];
  const onRequest = (req: IncomingMessage) =>
    seen.push(Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)])));
  return { port: await testProxy(target, { onRequest }), seen };
}

/** A connection to the HTTP MCP server behind `port` (path /mcp), started, logging to `logger`. */
export function httpConnection(port: number, logger: Logger, opts: Partial<ConnectionOptions> = {}): McpConnection {
  const url = new URL(`http://127.0.0.1:${port}/mcp`);
  const conn = new McpConnection(
    { type: 'http', name: 'web', url, headers: {}, timeoutMs: 10_000 },
    { log: logger, scrub: (s) => s, backoff: { baseMs: 200, maxMs: 200 }, ...opts },
  );
  conn.start();
  return conn;
}

/** A config file (JSON) with these MCP servers and roles (padded to the 3 roles deepq needs). */
export function writeConfig(mcpServers: Record<string, unknown>, roles: { name: string; tools: string[] }[]): string {
  const all = [...roles];
  for (let i = 0; all.length < 3; i++) all.push({ name: `idle-${i}`, tools: [] });
  const cfg = {
    mcpServers,
    roles: all.map((r) => ({
      name: r.name,
      systemPrompt: `You are the MCP test agent ${r.name}.`,
      tools: r.tools,
      middleware: ['logging', 'tokens', 'tier-routing', 'retry'],
      tier: 'LOW',
      maxTurns: 8,
      contract: 'text',
    })),
  };
  const file = join(tempDir('deepq-mcp-'), 'deepq.json');
  writeFileSync(file, JSON.stringify(cfg, null, 2));
  return file;
}

/** The goal text that makes the model plan one subtask of `role` running `scenario`. */
export const goalFor = (role: string, scenario: string) => `run ${scenario} as ${role}`;

/** One turn of a subagent's script: what the model answers, given the conversation so far. */
export type ScriptTurn = (ctx: {
  body: MessagesBody;
  turn: number;
  results: WireToolResult[];
}) => MessageReply | RawReply | Promise<MessageReply | RawReply>;

/** The tool_result blocks of the conversation's last (user) message. */
export function lastResults(body: MessagesBody): WireToolResult[] {
  const m = body.messages[body.messages.length - 1];
  if (!m || typeof m.content === 'string') return [];
  return (m.content as WireBlock[]).filter((b): b is WireToolResult => b.type === 'tool_result');
}

/**
 * The model: the planner plans one subtask (role and scenario from the goal text), the
 * reflector ends the goal, and each subagent plays the script of the scenario its instruction
 * names (turn = its number of earlier answers).
 */
export function scriptedModel(scripts: Record<string, ScriptTurn>): Handler {
  return async (body) => {
    const kind = roleOf(body);
    if (kind === 'planner') {
      const m = /^run (\S+) as (\S+)$/.exec(goalOf(body));
      if (!m) return text('{"subtasks":[]}');
      const [, scenario, role] = m;
      const subtask = {
        role,
        instruction: `scenario=${scenario}`,
        expected_artifact: `${scenario}.md`,
        read_files: [],
      };
      return text(JSON.stringify({ subtasks: [subtask] }));
    }
    if (kind === 'reflector') return text(JSON.stringify({ decision: 'end', reason: 'the scenario ran' }));
    const scenario = /scenario=(\S+)/.exec(firstUserText(body))?.[1] ?? '';
    const script = scripts[scenario];
    if (!script) return text(`no script for scenario ${JSON.stringify(scenario)}`);
    const turn = body.messages.filter((m) => m.role === 'assistant').length;
    return script({ body, turn, results: lastResults(body) });
  };
}

export { until } from '../../testing/until.ts';

export async function readyz(
  port: number,
): Promise<{ status: number; body: { ok: boolean; checks: Record<string, boolean> } }> {
  const res = await fetch(`http://127.0.0.1:${port}/readyz`);
  return { status: res.status, body: (await res.json()) as { ok: boolean; checks: Record<string, boolean> } };
}

/** Parsed pino lines of a process's output (non-JSON lines skipped). */
export function logLines(output: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const l of output.split('\n')) {
    if (!l.startsWith('{')) continue;
    try {
      out.push(JSON.parse(l) as Record<string, unknown>);
    } catch {
      /* a partial line */
    }
  }
  return out;
}
