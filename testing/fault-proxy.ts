// A TCP fault proxy in front of a Redis, for tests and the chaos script. Point a client at
// `proxy.url` instead of Redis; every connection is forwarded byte for byte to the target.
// From the test process the proxy can drop the reply of one chosen command and then cut that
// connection (the command ran, the client never heard back, ioredis reconnects and re-sends
// it), cut every connection, and add latency.
//
// To know which reply belongs to which command it parses both streams (bookkeeping only; the
// bytes go through unchanged): client requests (RESP arrays of bulk strings, or inline
// commands) and Redis replies (RESP2 and RESP3 — ioredis 6 sends HELLO 3 by default), kept in
// per-connection FIFO order. RESP3 pushes (`>`) and attributes (`|`) are not replies. A
// connection that enters subscribe mode, MONITOR, CLIENT REPLY or replication, or whose
// stream cannot be parsed, is no longer tracked: it is only forwarded, never dropped on.
import { createConnection, createServer, type Server, type Socket } from 'node:net';

export interface ProxiedCommand {
  /** The command name, upper-cased (`EVALSHA`, `CLIENT`, ...). */
  name: string;
  /** The arguments after the name, decoded as UTF-8. */
  args: string[];
  /** The arguments after the name, as sent. */
  raw: Buffer[];
  /** Which proxied connection sent it (1, 2, ... in accept order). */
  connectionId: number;
}

/** A command name (case-insensitive), or a predicate over the parsed command. */
export type CommandMatch = string | ((cmd: ProxiedCommand) => boolean);

/** Resolves with the command once its reply was dropped; `cancel()` disarms it (and rejects). */
export type DropHandle = Promise<ProxiedCommand> & { cancel(): void };

export interface FaultProxyStats {
  /** Client connections accepted so far. */
  connectionsOpened: number;
  /** Client connections open now. */
  openConnections: number;
  /** Open connections that are forwarded only (subscribe mode, MONITOR, unparsable, ...). */
  untrackedConnections: number;
  /** Commands seen, by upper-cased name, on every connection. */
  commands: Record<string, number>;
  /** Replies dropped by dropReplyOnce. */
  drops: number;
  /** Connections cut by cutAll or after a drop. */
  cuts: number;
}

export interface FaultProxy {
  host: string;
  port: number;
  /** `redis://127.0.0.1:<port>` */
  url: string;
  /**
   * Arms a one-shot fault: the next command (on any tracked connection) that satisfies `match`
   * is forwarded, Redis runs it, but its reply (and anything after it on that connection) is
   * dropped and the connection is cut. Replies to commands sent before it are delivered first.
   * If the connection goes away before the reply arrives, the fault is armed again.
   */
  dropReplyOnce(match: CommandMatch): DropHandle;
  /** Destroys every open connection (both sides, at once); returns how many. */
  cutAll(): number;
  /** Delays forwarding by `ms` in each direction (a round trip gains 2 × ms); 0 turns it off. */
  delay(ms: number): void;
  stats(): FaultProxyStats;
  /** How many times a command (case-insensitive) was seen. */
  commandCount(name: string): number;
  /** Stops listening, cuts every connection and rejects armed faults. */
  close(): Promise<void>;
}

// ---- RESP parsing ----------------------------------------------------------------------------

const INCOMPLETE = -1;
const CR = 13;
const LF = 10;
const code = (c: string) => c.charCodeAt(0);
/** Simple string, error, integer, double, boolean, big number, null. */
const LINE_TYPES = new Set(['+', '-', ':', ',', '#', '(', '_'].map(code));
/** Bulk string, blob error, verbatim string. */
const BLOB_TYPES = new Set(['$', '!', '='].map(code));
/** Array, set, push: n elements. */
const LIST_TYPES = new Set(['*', '~', '>'].map(code));
/** Map, attribute: n key/value pairs. */
const PAIR_TYPES = new Set(['%', '|'].map(code));
/** Frames that are not the reply to a command: RESP3 push and attribute. */
const NOT_A_REPLY = new Set(['>', '|'].map(code));
/** Commands after which the connection's replies no longer line up with its commands. */
const UNTRACKABLE = new Set(['SUBSCRIBE', 'PSUBSCRIBE', 'SSUBSCRIBE', 'MONITOR', 'SYNC', 'PSYNC', 'REPLCONF']);

class RespError extends Error {}

/** Index of the CR of the first CRLF at or after `from`, or INCOMPLETE. */
function lineEnd(buf: Buffer, from: number): number {
  const cr = buf.indexOf(CR, from);
  if (cr < 0 || cr + 1 >= buf.length) return INCOMPLETE;
  if (buf[cr + 1] !== LF) throw new RespError('CR without LF');
  return cr;
}

function parseLength(buf: Buffer, start: number, end: number): number {
  const text = buf.toString('latin1', start, end);
  if (!/^-?\d+$/.test(text)) throw new RespError(`bad length ${JSON.stringify(text)}`);
  return Number(text);
}

/** End offset of the reply frame starting at `pos`, or INCOMPLETE. Throws on a malformed stream. */
function frameEnd(buf: Buffer, pos: number): number {
  if (pos >= buf.length) return INCOMPLETE;
  const type = buf[pos];
  const eol = lineEnd(buf, pos + 1);
  if (eol === INCOMPLETE) return INCOMPLETE;
  const after = eol + 2;
  if (LINE_TYPES.has(type)) return after;
  const n = parseLength(buf, pos + 1, eol);
  if (BLOB_TYPES.has(type)) return blobEnd(buf, after, n);
  if (LIST_TYPES.has(type)) return elementsEnd(buf, after, Math.max(n, 0));
  if (PAIR_TYPES.has(type)) return elementsEnd(buf, after, Math.max(n, 0) * 2);
  throw new RespError(`unknown reply type ${JSON.stringify(String.fromCharCode(type))}`);
}

/** End of a blob whose payload starts at `start`; a negative length is RESP2's null bulk. */
function blobEnd(buf: Buffer, start: number, length: number): number {
  if (length < 0) return start;
  const end = start + length + 2;
  if (end > buf.length) return INCOMPLETE;
  if (buf[end - 2] !== CR || buf[end - 1] !== LF) throw new RespError('blob not followed by CRLF');
  return end;
}

function elementsEnd(buf: Buffer, start: number, count: number): number {
  let pos = start;
  for (let i = 0; i < count; i++) {
    pos = frameEnd(buf, pos);
    if (pos === INCOMPLETE) return INCOMPLETE;
  }
  return pos;
}

interface ParsedRequest {
  end: number;
  /** Name first; empty for the no-op requests Redis does not answer (`*0`, a blank line). */
  args: Buffer[];
}

/** Parses the request starting at `pos`, or returns undefined while it is incomplete. */
function parseRequest(buf: Buffer, pos: number): ParsedRequest | undefined {
  if (pos >= buf.length) return undefined;
  if (buf[pos] !== code('*')) return parseInline(buf, pos);
  const eol = lineEnd(buf, pos + 1);
  if (eol === INCOMPLETE) return undefined;
  const count = parseLength(buf, pos + 1, eol);
  const args: Buffer[] = [];
  let at = eol + 2;
  for (let i = 0; i < count; i++) {
    if (at >= buf.length) return undefined;
    if (buf[at] !== code('$')) throw new RespError('request element is not a bulk string');
    const lenEnd = lineEnd(buf, at + 1);
    if (lenEnd === INCOMPLETE) return undefined;
    const len = parseLength(buf, at + 1, lenEnd);
    const end = blobEnd(buf, lenEnd + 2, len);
    if (end === INCOMPLETE) return undefined;
    args.push(buf.subarray(lenEnd + 2, end - 2));
    at = end;
  }
  return { end: at, args };
}

/** An inline command: one line of space-separated words (quoting is not supported). */
function parseInline(buf: Buffer, pos: number): ParsedRequest | undefined {
  const lf = buf.indexOf(LF, pos);
  if (lf < 0) return undefined;
  const line = buf.toString('latin1', pos, lf).replace(/\r$/, '');
  const args = line
    .split(/\s+/)
    .filter((w) => w !== '')
    .map((w) => Buffer.from(w, 'latin1'));
  return { end: lf + 1, args };
}

// ---- forwarding ------------------------------------------------------------------------------

/** Runs actions in order, each no earlier than `delay` ms after it was queued. */
class Outbox {
  private queue: { at: number; run: () => void }[] = [];
  private timer?: NodeJS.Timeout;

  constructor(private readonly delayMs: () => number) {}

  push(run: () => void): void {
    const delay = this.delayMs();
    if (delay <= 0 && this.queue.length === 0) {
      run();
      return;
    }
    const last = this.queue.at(-1)?.at ?? 0;
    this.queue.push({ at: Math.max(Date.now() + delay, last), run });
    this.schedule();
  }

  clear(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.queue = [];
  }

  private schedule(): void {
    if (this.timer || this.queue.length === 0) return;
    this.timer = setTimeout(() => this.flush(), Math.max(0, this.queue[0].at - Date.now()));
  }

  private flush(): void {
    this.timer = undefined;
    while (this.queue.length > 0 && this.queue[0].at <= Date.now()) this.queue.shift()!.run();
    this.schedule();
  }
}

/** Writes with backpressure: a full destination pauses the source until it drains. */
function forward(src: Socket, dst: Socket, data: Buffer): void {
  if (dst.destroyed || data.length === 0) return;
  if (!dst.write(data) && !src.isPaused()) {
    src.pause();
    dst.once('drain', () => src.resume());
  }
}

interface Fault {
  match: (cmd: ProxiedCommand) => boolean;
  resolve: (cmd: ProxiedCommand) => void;
  reject: (err: Error) => void;
}

interface Pending {
  name: string;
  /** Set when this command's reply is to be dropped. */
  fault?: Fault;
  cmd?: ProxiedCommand;
}

/** What a connection needs from the proxy. */
interface ProxyCore {
  delayMs: number;
  faults: Fault[];
  count(name: string): void;
  takeFault(cmd: () => ProxiedCommand): Fault | undefined;
  rearm(fault: Fault): void;
  dropped(fault: Fault, cmd: ProxiedCommand): void;
  closed(conn: Connection): void;
}

class Connection {
  tracked = true;
  private parsing = true;
  private stopped = false;
  private reqBuf: Buffer = Buffer.alloc(0);
  private repBuf: Buffer = Buffer.alloc(0);
  /** Bytes at the start of repBuf already sent to the client. */
  private repSent = 0;
  private pending: Pending[] = [];
  private readonly toServer: Outbox;
  private readonly toClient: Outbox;

  constructor(
    readonly id: number,
    private readonly client: Socket,
    private readonly server: Socket,
    private readonly core: ProxyCore,
  ) {
    this.toServer = new Outbox(() => core.delayMs);
    this.toClient = new Outbox(() => core.delayMs);
    for (const s of [client, server]) {
      s.setNoDelay(true);
      s.on('error', () => this.destroy());
      s.on('close', () => this.destroy());
    }
    client.on('data', (chunk: Buffer) => this.onRequestData(chunk));
    server.on('data', (chunk: Buffer) => this.onReplyData(chunk));
  }

  /** Cuts both sides now; whatever is in flight is lost. */
  destroy(): void {
    if (this.stopped && this.client.destroyed && this.server.destroyed) return;
    this.stop();
    this.client.destroy();
    this.server.destroy();
  }

  /** Stops forwarding and parsing; `keepQueued` lets already queued (delayed) writes go out. */
  private stop(keepQueued = false): void {
    if (this.stopped) return;
    this.stopped = true;
    if (!keepQueued) {
      this.toServer.clear();
      this.toClient.clear();
    }
    this.untrack();
    this.core.closed(this);
  }

  private onRequestData(chunk: Buffer): void {
    if (this.stopped) return;
    this.toServer.push(() => forward(this.client, this.server, chunk));
    if (!this.parsing) return;
    this.reqBuf = this.reqBuf.length ? Buffer.concat([this.reqBuf, chunk]) : chunk;
    let pos = 0;
    try {
      for (let req = parseRequest(this.reqBuf, pos); req; req = parseRequest(this.reqBuf, pos)) {
        pos = req.end;
        if (req.args.length > 0) this.onCommand(req.args);
      }
    } catch {
      this.parsing = false;
      this.untrack();
      pos = this.reqBuf.length;
    }
    this.reqBuf = this.reqBuf.subarray(pos);
  }

  private onCommand(all: Buffer[]): void {
    const name = all[0].toString('latin1').toUpperCase();
    this.core.count(name);
    if (untrackable(name, all)) this.untrack();
    if (!this.tracked) return;
    let cmd: ProxiedCommand | undefined;
    const build = () => {
      const raw = all.slice(1).map((b) => Buffer.from(b));
      cmd ??= { name, args: raw.map((b) => b.toString()), raw, connectionId: this.id };
      return cmd;
    };
    const fault = this.core.faults.length > 0 ? this.core.takeFault(build) : undefined;
    this.pending.push({ name, fault, cmd: fault ? build() : undefined });
  }

  private onReplyData(chunk: Buffer): void {
    if (this.stopped) return;
    if (!this.tracked) {
      this.toClient.push(() => forward(this.server, this.client, chunk));
      return;
    }
    // Until a marked command's reply may arrive, bytes go straight through; after that only
    // whole frames are sent, so the marked reply can be held back entirely.
    if (!this.pending.some((p) => p.fault)) {
      this.toClient.push(() => forward(this.server, this.client, chunk));
      this.repSent = this.repBuf.length + chunk.length;
    }
    this.repBuf = this.repBuf.length ? Buffer.concat([this.repBuf, chunk]) : chunk;
    try {
      this.consumeReplies();
    } catch {
      this.untrack();
    }
  }

  private consumeReplies(): void {
    let pos = 0;
    for (let end = frameEnd(this.repBuf, pos); end !== INCOMPLETE; end = frameEnd(this.repBuf, pos)) {
      const next = NOT_A_REPLY.has(this.repBuf[pos]) ? undefined : this.pending.shift();
      if (next?.fault) {
        this.dropFrom(pos, next);
        return;
      }
      pos = end;
    }
    this.sendHeld(pos);
    this.repBuf = this.repBuf.subarray(pos);
    this.repSent = Math.max(0, this.repSent - pos);
  }

  /** Sends the not-yet-sent reply bytes before `upTo`. */
  private sendHeld(upTo: number): void {
    if (this.repSent >= upTo) return;
    const bytes = this.repBuf.subarray(this.repSent, upTo);
    this.repSent = upTo;
    this.toClient.push(() => forward(this.server, this.client, bytes));
  }

  /**
   * The reply at `pos` is the marked one: send the replies before it, drop it and all after,
   * and close the connection once those earlier replies are flushed.
   */
  private dropFrom(pos: number, marked: Pending): void {
    this.sendHeld(pos);
    this.core.dropped(marked.fault!, marked.cmd!);
    // Other marked commands still pending are armed again by untrack().
    this.stop(true);
    this.server.destroy();
    // end() sends FIN after the data already written; destroy() could reset it away.
    this.toClient.push(() => this.client.end());
    setTimeout(() => this.client.destroy(), this.core.delayMs + 1000).unref();
  }

  /** Stops matching replies to commands: bytes are only forwarded from now on. */
  private untrack(): void {
    if (!this.tracked) return;
    this.tracked = false;
    for (const p of this.pending) if (p.fault) this.core.rearm(p.fault);
    this.pending = [];
    if (!this.stopped) this.sendHeld(this.repBuf.length);
    this.repBuf = Buffer.alloc(0);
    this.repSent = 0;
  }
}

function untrackable(name: string, all: Buffer[]): boolean {
  if (UNTRACKABLE.has(name)) return true;
  return name === 'CLIENT' && all[1]?.toString('latin1').toUpperCase() === 'REPLY';
}

function toPredicate(match: CommandMatch): (cmd: ProxiedCommand) => boolean {
  if (typeof match !== 'string') return match;
  const name = match.toUpperCase();
  return (cmd) => cmd.name === name;
}

// ---- the proxy -------------------------------------------------------------------------------

class FaultProxyImpl implements ProxyCore {
  delayMs = 0;
  faults: Fault[] = [];
  readonly conns = new Set<Connection>();
  private readonly counts = new Map<string, number>();
  private opened = 0;
  private drops = 0;
  private cuts = 0;

  constructor(private readonly target: { host: string; port: number }) {}

  accept(client: Socket): void {
    const server = createConnection({ host: this.target.host, port: this.target.port });
    this.conns.add(new Connection(++this.opened, client, server, this));
  }

  count(name: string): void {
    this.counts.set(name, (this.counts.get(name) ?? 0) + 1);
  }

  takeFault(cmd: () => ProxiedCommand): Fault | undefined {
    const i = this.faults.findIndex((f) => {
      try {
        return f.match(cmd());
      } catch (err) {
        queueMicrotask(() => this.cancel(f, err as Error));
        return false;
      }
    });
    return i < 0 ? undefined : this.faults.splice(i, 1)[0];
  }

  rearm(fault: Fault): void {
    this.faults.unshift(fault);
  }

  dropped(fault: Fault, cmd: ProxiedCommand): void {
    this.drops++;
    this.cuts++;
    fault.resolve(cmd);
  }

  closed(conn: Connection): void {
    this.conns.delete(conn);
  }

  cancel(fault: Fault, err: Error): void {
    const i = this.faults.indexOf(fault);
    if (i >= 0) this.faults.splice(i, 1);
    fault.reject(err);
  }

  dropReplyOnce(match: CommandMatch): DropHandle {
    let fault!: Fault;
    const promise = new Promise<ProxiedCommand>((resolve, reject) => {
      fault = { match: toPredicate(match), resolve, reject };
    });
    // A cancelled or never-awaited handle must not become an unhandled rejection.
    promise.catch(() => {});
    this.faults.push(fault);
    return Object.assign(promise, { cancel: () => this.cancel(fault, new Error('dropReplyOnce cancelled')) });
  }

  cutAll(): number {
    const all = [...this.conns];
    for (const c of all) c.destroy();
    this.cuts += all.length;
    return all.length;
  }

  stats(): FaultProxyStats {
    return {
      connectionsOpened: this.opened,
      openConnections: this.conns.size,
      untrackedConnections: [...this.conns].filter((c) => !c.tracked).length,
      commands: Object.fromEntries(this.counts),
      drops: this.drops,
      cuts: this.cuts,
    };
  }

  commandCount(name: string): number {
    return this.counts.get(name.toUpperCase()) ?? 0;
  }
}

/** Starts a proxy on a free 127.0.0.1 port, forwarding to `target`. */
export async function startFaultProxy(target: { host: string; port: number }): Promise<FaultProxy> {
  const core = new FaultProxyImpl(target);
  const listener: Server = createServer((client) => core.accept(client));
  await new Promise<void>((resolve, reject) => {
    listener.once('error', reject);
    listener.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (listener.address() as { port: number }).port;
  return {
    host: '127.0.0.1',
    port,
    url: `redis://127.0.0.1:${port}`,
    dropReplyOnce: (match) => core.dropReplyOnce(match),
    cutAll: () => core.cutAll(),
    delay: (ms) => {
      core.delayMs = Math.max(0, ms);
    },
    stats: () => core.stats(),
    commandCount: (name) => core.commandCount(name),
    close: async () => {
      const closing = new Promise<void>((resolve) => listener.close(() => resolve()));
      core.cutAll();
      for (const f of [...core.faults]) core.cancel(f, new Error('fault proxy closed'));
      await closing;
    },
  };
}
