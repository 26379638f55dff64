// One MCP server as seen from a worker process: a client over stdio or streamable HTTP that
// connects, lists the server's tools (again on its list-changed notification), pings it while
// idle, and reconnects with backoff when it dies or stops answering. Calls wait for a
// reconnection, all within the server's timeoutMs; past it, or when the caller's signal aborts,
// the request is cancelled (the SDK sends notifications/cancelled to the server).

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  type CallToolResult,
  ErrorCode,
  McpError,
  ToolListChangedNotificationSchema,
  ToolSchema,
} from '@modelcontextprotocol/sdk/types.js';
import type { Logger } from 'pino';
import { z } from 'zod';
import { cutChars } from '../tools/paging.ts';
import { cappedFetch } from './capped-fetch.ts';
import { inputSchemaProblem, modelInputSchema } from './input-schema.ts';
import type { McpMetrics } from './metrics.ts';
import type { ResolvedServer } from './resolve.ts';
import { closeServer, newServerMark, SERVER_MARK_ENV, type ServerProcesses } from './server-processes.ts';

export const CLIENT_INFO = { name: 'deepq', version: '0.1.0' };

/** A tool as the server lists it (what deepq keeps of it). */
export interface McpToolInfo {
  name: string;
  description?: string;
  title?: string;
  inputSchema: Record<string, unknown>;
  /** The server marks it read-only or idempotent (its annotations): a call may run again after a crash. */
  repeatable: boolean;
}

export type ConnectionState = 'connecting' | 'up' | 'down' | 'closed';

/** Why a call did not return the server's result. */
export type McpCallFailure = 'timeout' | 'cancelled' | 'unavailable' | 'connection' | 'error';

export class McpCallError extends Error {
  constructor(
    readonly kind: McpCallFailure,
    message: string,
  ) {
    super(message);
    this.name = 'McpCallError';
  }
}

export interface ConnectionOptions {
  log: Logger;
  /** Removes secrets from any text that leaves the connection (logs, errors, results). */
  scrub: (text: string) => string;
  metrics?: McpMetrics;
  /** Reconnect delays: base × 2^failures, capped, ±20 % jitter. */
  backoff?: { baseMs: number; maxMs: number };
  /** An idle live connection is pinged this often (default 15 s); a failed ping reconnects. */
  pingIntervalMs?: number;
  /** A ping unanswered this long fails (default: the server's timeoutMs, at most 10 s). */
  pingTimeoutMs?: number;
  /** Called when the state or the tool list changes. */
  onChange?: () => void;
}

const DEFAULT_BACKOFF = { baseMs: 250, maxMs: 30_000 };
/** A connection that lived this long resets the backoff when it is lost. */
const STABLE_MS = 30_000;
const STDERR_TAIL = 10;
/** A stderr line kept (and held while it has no end yet) up to this many characters. */
const STDERR_LINE_CHARS = 500;
const MAX_TOOL_PAGES = 100;
/** Tools kept of one server's listing: 30,000 (a cursor that never ended) held 300 MB. */
export const MAX_LISTED_TOOLS = 2000;
/** Between two listings the server asked for (tools/list_changed): a flood relisted 900 times a second. */
const RELIST_GAP_MS = 1000;
/**
 * A tool description the model is sent, at most (characters): it rides in every request of the
 * role, and a server with 3 KB descriptions over thousands of tools filled each one past any context.
 */
export const MAX_TOOL_DESCRIPTION_CHARS = 4000;
/** A tools/list page with its tools unchecked: each is checked on its own (listTools). */
const ToolPageSchema = z.looseObject({ tools: z.array(z.unknown()), nextCursor: z.string().optional() });

type Transport = StdioClientTransport | StreamableHTTPClientTransport;

export class McpConnection {
  state: ConnectionState = 'down';
  /** The last tool listing (kept while reconnecting); null until the first one. */
  tools: McpToolInfo[] | null = null;
  /** Why the connection is down (scrubbed). */
  lastError: string | undefined;
  /** The stdio server's process id from its start (so a failed attempt's process is stopped too). */
  pid: number | null = null;
  /** The mark in the current attempt's server environment (server-processes.ts). */
  private mark = newServerMark();
  private client?: Client;
  private transport?: Transport;
  /** Bumped on every (re)connect and loss: events of an older client are ignored. */
  private gen = 0;
  private failures = 0;
  private everUp = false;
  private upSince = 0;
  private retryTimer?: NodeJS.Timeout;
  private pingTimer?: NodeJS.Timeout;
  /** The generation whose ping is in flight (-1: none). */
  private pinging = -1;
  /** Calls of the current generation awaiting their result. */
  private callsInFlight = 0;
  /** Calls ever sent: a ping sees whether one was sent while it waited. */
  private callsSent = 0;
  private refreshing: Promise<void> | undefined;
  private refreshAgain = false;
  private readonly waiters = new Set<() => void>();
  private readonly stderrTail: string[] = [];

  constructor(
    readonly server: ResolvedServer,
    private readonly opts: ConnectionOptions,
  ) {}

  get name(): string {
    return this.server.name;
  }

  /** Starts connecting (in the background; failures are logged and retried). */
  start(): void {
    if (this.state === 'down' && !this.retryTimer) void this.connect();
  }

  private setState(state: ConnectionState): void {
    this.state = state;
    this.opts.metrics?.up.set({ server: this.name }, state === 'up' ? 1 : 0);
    this.changed();
  }

  private changed(): void {
    for (const w of [...this.waiters]) w();
    this.opts.onChange?.();
  }

  private createClient(gen: number): { client: Client; transport: Transport } {
    const s = this.server;
    const transport: Transport =
      s.type === 'stdio'
        ? new StdioClientTransport({ command: s.command, args: s.args, env: this.markedEnv(s.env), stderr: 'pipe' })
        : new StreamableHTTPClientTransport(s.url, { requestInit: { headers: s.headers }, fetch: cappedFetch() });
    if (transport instanceof StdioClientTransport) this.readStderr(transport);
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    client.onclose = () => this.lost(gen, 'the connection closed');
    // Transport hiccups (an SSE stream dropped, a broken pipe): check the server is still there.
    client.onerror = () => {
      if (gen === this.gen && this.state === 'up') void this.ping(gen);
    };
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => this.refreshTools(gen));
    return { client, transport };
  }

  /** The server's environment with this attempt's mark (a new one per attempt). */
  private markedEnv(env: Record<string, string>): Record<string, string> {
    this.mark = newServerMark();
    return { ...env, [SERVER_MARK_ENV]: this.mark };
  }

  private readStderr(transport: StdioClientTransport): void {
    let partial = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      const lines = (partial + String(chunk)).split('\n');
      // Only a line's first 500 characters are kept: a line that never ends (a `\r` progress
      // bar) must not grow in memory, nor be split again with every chunk.
      partial = (lines.pop() ?? '').slice(0, STDERR_LINE_CHARS);
      for (const raw of lines) {
        const line = this.opts.scrub(raw.trimEnd()).slice(0, STDERR_LINE_CHARS);
        if (!line) continue;
        this.stderrTail.push(line);
        if (this.stderrTail.length > STDERR_TAIL) this.stderrTail.shift();
        this.opts.log.debug({ mcpServer: this.name, line }, 'MCP server stderr');
      }
    });
  }

  private async connect(): Promise<void> {
    this.retryTimer = undefined;
    if (this.state === 'closed') return;
    const gen = ++this.gen;
    this.stderrTail.length = 0;
    this.refreshAgain = false;
    const { client, transport } = this.createClient(gen);
    this.client = client;
    this.transport = transport;
    this.setState('connecting');
    try {
      const connecting = client.connect(transport, { timeout: this.server.timeoutMs });
      // The SDK spawns a stdio server synchronously in connect() and forgets its pid when the
      // attempt fails: taken now, so down() stops a failed attempt's process tree as well.
      this.pid = transport instanceof StdioClientTransport ? transport.pid : null;
      await connecting;
      const tools = await this.listTools(client);
      if (gen !== this.gen) return;
      this.tools = tools;
      this.lastError = undefined;
      this.everUp = true;
      this.upSince = Date.now();
      this.opts.metrics?.connects.inc({ server: this.name, outcome: 'ok' });
      this.setState('up');
      this.schedulePing(gen);
      if (this.refreshAgain) {
        this.refreshAgain = false;
        this.refreshTools(gen);
      }
      const fields = { mcpServer: this.name, tools: tools.length, serverPid: this.pid ?? undefined };
      this.opts.log.info(fields, `MCP server "${this.name}" connected: ${tools.length} tools`);
    } catch (err) {
      if (gen !== this.gen) return;
      this.opts.metrics?.connects.inc({ server: this.name, outcome: 'failed' });
      const why = this.describe(err);
      this.down(gen, this.everUp ? `cannot reconnect: ${why}` : `cannot start: ${why}`, true);
    }
  }

  /**
   * Every page of tools/list. Each tool is checked on its own: one the SDK's schema refuses (an
   * input schema that is not an object) is left out with a warning naming it, where checking the
   * page whole refused the server, and so every tool of it a role uses.
   */
  private async listTools(client: Client): Promise<McpToolInfo[]> {
    const out: McpToolInfo[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_TOOL_PAGES; page++) {
      const params = cursor ? { cursor } : undefined;
      const res = await client.request({ method: 'tools/list', params }, ToolPageSchema, {
        timeout: this.server.timeoutMs,
      });
      for (const raw of res.tools) {
        const t = this.checkedTool(raw);
        if (!t) continue;
        const { inputSchema, description, moved } = modelInputSchema(t.inputSchema, t.description || t.title);
        if (moved.length) {
          const fields = { mcpServer: this.name, tool: this.opts.scrub(t.name).slice(0, 100), moved };
          this.opts.log.warn(
            fields,
            `MCP tool's input schema has ${moved.join('/')} at its top level: moved into its description`,
          );
        }
        const { title, annotations: a } = t;
        const repeatable = a?.readOnlyHint === true || a?.idempotentHint === true;
        out.push({
          name: t.name,
          description: this.cutDescription(t.name, description),
          title,
          inputSchema,
          repeatable,
        });
      }
      cursor = res.nextCursor;
      if (!cursor) return out;
      if (out.length >= MAX_LISTED_TOOLS) break;
    }
    const kept = out.slice(0, MAX_LISTED_TOOLS);
    const fields = { mcpServer: this.name, tools: kept.length };
    this.opts.log.warn(
      fields,
      `MCP server "${this.name}" lists more tools than are read: the first ${kept.length} kept`,
    );
    return kept;
  }

  private cutDescription(tool: string, description: string | undefined): string | undefined {
    if (!description || description.length <= MAX_TOOL_DESCRIPTION_CHARS) return description;
    const fields = { mcpServer: this.name, tool: this.opts.scrub(tool).slice(0, 100), chars: description.length };
    this.opts.log.warn(fields, `MCP tool's description cut to ${MAX_TOOL_DESCRIPTION_CHARS} characters`);
    return `${cutChars(description, MAX_TOOL_DESCRIPTION_CHARS - 1)}…`;
  }

  /** A listed tool as the SDK's schema reads it, or null (logged): refused by that schema, or unfit to send. */
  private checkedTool(raw: unknown) {
    const parsed = ToolSchema.safeParse(raw);
    const issue = parsed.error?.issues[0];
    const why = parsed.success
      ? inputSchemaProblem(parsed.data.inputSchema)
      : `${issue?.path.join('.') || 'tool'}: ${issue?.message ?? 'invalid'}`;
    if (parsed.success && why === null) return parsed.data;
    const name = typeof (raw as { name?: unknown })?.name === 'string' ? (raw as { name: string }).name : '?';
    const problem = this.opts.scrub(why ?? 'invalid').slice(0, 300);
    const fields = { mcpServer: this.name, tool: this.opts.scrub(name).slice(0, 100), problem };
    this.opts.log.warn(fields, `MCP server "${this.name}" lists an invalid tool: left out`);
    return null;
  }

  /** The server said its tools changed: list them again (one listing at a time). */
  private refreshTools(gen: number): void {
    const client = this.client;
    if (gen !== this.gen || !client) return;
    // Mid-listing or still connecting: list again once that is done.
    if (this.refreshing || this.state !== 'up') {
      this.refreshAgain = true;
      return;
    }
    this.refreshing = this.listTools(client)
      .then(
        (tools) => {
          if (gen !== this.gen) return;
          this.tools = tools;
          this.opts.log.info({ mcpServer: this.name, tools: tools.length }, 'MCP server tools changed: listed again');
          this.changed();
        },
        (err) => {
          const fields = { mcpServer: this.name, reason: this.describe(err) };
          this.opts.log.warn(fields, 'MCP server tools changed but listing them failed: keeping the last list');
        },
      )
      .finally(() => {
        this.refreshing = undefined;
        if (this.refreshAgain) {
          this.refreshAgain = false;
          setTimeout(() => this.refreshTools(this.gen), RELIST_GAP_MS).unref();
        }
      });
  }

  private schedulePing(gen: number): void {
    const every = this.opts.pingIntervalMs ?? 15_000;
    if (every <= 0) return;
    clearTimeout(this.pingTimer);
    this.pingTimer = setTimeout(() => void this.ping(gen), every);
    this.pingTimer.unref();
  }

  /**
   * Checks the server answers. A server busy with a call may answer nothing until the call is
   * done (a tool blocking its event loop), and calls have their own timeouts: it is pinged only
   * while idle, and a ping that timed out while a call was sent is no verdict.
   */
  private async ping(gen: number, askedByFailure = false): Promise<void> {
    const client = this.client;
    if (this.pinging === gen || gen !== this.gen || this.state !== 'up' || !client) return;
    // A failed call's check goes now (a session expired beside a long call fails every new call).
    if (this.callsInFlight > 0 && !askedByFailure) {
      this.schedulePing(gen);
      return;
    }
    this.pinging = gen;
    const sentBefore = this.callsSent;
    try {
      await client.ping({ timeout: this.opts.pingTimeoutMs ?? Math.min(this.server.timeoutMs, 10_000) });
      if (gen === this.gen) this.schedulePing(gen);
    } catch (err) {
      const timedOut = err instanceof McpError && err.code === ErrorCode.RequestTimeout;
      const busy = this.callsSent !== sentBefore || this.callsInFlight > 0;
      if (!(timedOut && busy)) this.lost(gen, `ping failed: ${this.describe(err)}`);
      else if (gen === this.gen) this.schedulePing(gen);
    } finally {
      if (this.pinging === gen) this.pinging = -1;
    }
  }

  /** A live connection was lost (process exit, failed ping or call): reconnect. */
  private lost(gen: number, reason: string): void {
    if (gen !== this.gen || this.state !== 'up') return;
    this.opts.metrics?.connects.inc({ server: this.name, outcome: 'lost' });
    if (Date.now() - this.upSince >= STABLE_MS) this.failures = 0;
    this.down(gen, `connection lost: ${reason}`, false);
  }

  /** Marks the connection down, closes its client and schedules the next attempt. */
  private down(gen: number, reason: string, failedAttempt: boolean): void {
    if (gen !== this.gen || this.state === 'closed') return;
    this.gen++;
    const old = this.client;
    const oldTransport = this.transport;
    this.client = undefined;
    this.transport = undefined;
    const oldServer = this.serverProcesses();
    this.pid = null;
    this.callsInFlight = 0;
    clearTimeout(this.pingTimer);
    // A session given up on (a ping timed out, a call failed) may still be open at the server.
    void endSession(oldTransport).then(() => closeServer(() => old?.close() ?? Promise.resolve(), oldServer));
    // A stdio server that fails to start usually says why on stderr: its last line goes with the reason.
    const said = failedAttempt ? this.stderrTail.at(-1) : undefined;
    this.lastError = this.opts.scrub(said ? `${reason} (stderr: ${cutChars(said, 200)})` : reason);
    const { baseMs, maxMs } = this.opts.backoff ?? DEFAULT_BACKOFF;
    const delay = Math.round(Math.min(maxMs, baseMs * 2 ** this.failures) * (0.8 + Math.random() * 0.4));
    this.failures++;
    this.setState('down');
    const stderr = failedAttempt && this.stderrTail.length ? [...this.stderrTail] : undefined;
    const fields = { mcpServer: this.name, reason: this.lastError, retryInMs: delay, stderr };
    const msg = `MCP server "${this.name}" ${this.lastError}; retrying in ${delay} ms`;
    if (this.everUp && !failedAttempt) this.opts.log.warn(fields, msg);
    else this.opts.log.error(fields, msg);
    this.retryTimer = setTimeout(() => void this.connect(), delay);
    this.retryTimer.unref();
  }

  /** A readable, scrubbed reason for an error. */
  describe(err: unknown): string {
    const e = err as { message?: string; code?: unknown; cause?: { message?: string; code?: unknown } };
    let msg = String(e?.message ?? err);
    const cause = e?.cause?.code ?? e?.cause?.message;
    if (cause && !msg.includes(String(cause))) msg += ` (${String(cause)})`;
    return cutChars(this.opts.scrub(msg), 500);
  }

  /** Resolves once `pred` holds; rejects at the deadline, on abort, or when closed. */
  waitFor(pred: () => boolean, deadline: number, signal?: AbortSignal): Promise<void> {
    if (pred()) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const done = (err?: Error) => {
        this.waiters.delete(check);
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolve();
      };
      const check = () => {
        if (pred()) done();
        else if (this.state === 'closed') done(new McpCallError('unavailable', `MCP server "${this.name}" is closed`));
      };
      const onAbort = () => done(new McpCallError('cancelled', `cancelled: ${abortReason(signal)}`));
      // Not unref'd: bounded by the deadline, and a caller awaiting it must get its answer.
      const timer = setTimeout(
        () => done(new McpCallError('timeout', 'timed out')),
        Math.max(0, deadline - Date.now()),
      );
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.add(check);
      check();
    });
  }

  /**
   * Calls a tool: waits for the connection (if it is reconnecting), then sends the request,
   * all within the server's timeoutMs. The result is the server's, isError included.
   */
  async call(tool: string, args: Record<string, unknown>, signal?: AbortSignal): Promise<CallToolResult> {
    const timeoutMs = this.server.timeoutMs;
    const deadline = Date.now() + timeoutMs;
    const what = `MCP tool "${tool}" of server "${this.name}"`;
    try {
      await this.waitFor(() => this.state === 'up', deadline, signal);
    } catch (err) {
      if (!(err instanceof McpCallError) || err.kind !== 'timeout') throw this.callError(err, what, signal);
      const why = this.lastError ? `: ${this.lastError}` : '';
      throw new McpCallError('unavailable', `${what}: the server is unavailable${why} (waited ${timeoutMs} ms)`);
    }
    const client = this.client!;
    const gen = this.gen;
    // A signal of our own per call: the SDK never removes its abort listener from the one given.
    const ac = new AbortController();
    const onAbort = () => ac.abort(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    this.callsInFlight++;
    this.callsSent++;
    try {
      const timeout = Math.max(1, deadline - Date.now());
      return (await client.callTool({ name: tool, arguments: args }, undefined, {
        timeout,
        signal: ac.signal,
      })) as CallToolResult;
    } catch (err) {
      throw this.callError(err, what, signal, gen);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      // A lost generation's count was reset with it.
      if (gen === this.gen) this.callsInFlight--;
    }
  }

  private callError(err: unknown, what: string, signal: AbortSignal | undefined, gen?: number): McpCallError {
    if (signal?.aborted) return new McpCallError('cancelled', `${what}: cancelled (${abortReason(signal)})`);
    if (err instanceof McpCallError) return new McpCallError(err.kind, `${what}: ${err.message}`);
    if (err instanceof McpError && err.code === ErrorCode.RequestTimeout) {
      const ms = this.server.timeoutMs;
      return new McpCallError('timeout', `${what} timed out after ${ms} ms: the call was cancelled`);
    }
    const why = this.describe(err);
    // A connection that closed (a stdio server gone) was marked lost, a new generation, before
    // the SDK failed the calls in flight on it.
    if (gen !== undefined && gen !== this.gen) {
      return new McpCallError('connection', `${what}: the connection failed (${why}); reconnecting`);
    }
    // An error the server answered: -32000 is also JSON-RPC's code for any server error.
    if (err instanceof McpError) return new McpCallError('error', `${what}: ${why}`);
    // This request failed in transport (an HTTP 429 or 502 from a gateway, a reset): no verdict on
    // the connection, whose other calls and server state live on. A ping decides (once this call
    // is no longer counted in flight), reconnecting if the server is gone or its session expired.
    if (gen !== undefined) queueMicrotask(() => void this.ping(gen, true));
    return new McpCallError('connection', `${what}: the request failed (${why})`);
  }

  /** Closes the client (ending a stdio server's process, an HTTP session) and stops retrying. */
  async close(): Promise<void> {
    if (this.state === 'closed') return;
    this.gen++;
    clearTimeout(this.retryTimer);
    clearTimeout(this.pingTimer);
    const { client, transport } = this;
    const server = this.serverProcesses();
    this.client = undefined;
    this.transport = undefined;
    this.pid = null;
    this.callsInFlight = 0;
    this.setState('closed');
    await endSession(transport);
    await withTimeout(
      closeServer(() => client?.close() ?? Promise.resolve(), server),
      5000,
    );
  }

  /** The stdio server's processes to stop with the client (none for HTTP). */
  private serverProcesses(): ServerProcesses | null {
    return this.server.type === 'stdio' ? { pid: this.pid, mark: this.mark } : null;
  }
}

/** Ends an HTTP session at its server (DELETE with its id), within a second; nothing for stdio. */
async function endSession(transport: Transport | undefined): Promise<void> {
  if (transport instanceof StreamableHTTPClientTransport && transport.sessionId) {
    await withTimeout(transport.terminateSession(), 1000);
  }
}

function abortReason(signal: AbortSignal | undefined): string {
  const r = signal?.reason as { message?: string } | string | undefined;
  return String((typeof r === 'object' ? r?.message : r) ?? 'aborted');
}

async function withTimeout(p: Promise<unknown> | undefined, ms: number): Promise<void> {
  if (!p) return;
  let t: NodeJS.Timeout | undefined;
  await Promise.race([p.catch(() => {}), new Promise<void>((r) => (t = setTimeout(r, ms)))]);
  clearTimeout(t);
}
