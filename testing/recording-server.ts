// What the two model-API test servers (testing/messages-api-server.ts, chat-completions-server.ts)
// share: an HTTP server on a free loopback port that records every request before it is
// answered, lets the server answer it as its test decides (a reply, a raw status, a reset
// connection, a hang, a body that stalls halfway), and notes a client that gave up meanwhile
// (`abortedAt`: an aborted call, as the model endpoint sees it).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** One request as received: the parts both APIs have, and its JSON body. */
export interface RecordedHttpRequest<B> {
  /** 0-based, over every request the server received. */
  index: number;
  method: string;
  path: string;
  /** Lower-cased header names. */
  headers: Record<string, string>;
  /** The API key as the server's API reads it (see `apiKeyOf`). */
  apiKey: string | null;
  rawBody: string;
  /** Parsed JSON body (undefined when it did not parse). */
  body: B;
  receivedAt: number;
  /**
   * When the connection closed before the answer was sent (Date.now()): the client aborted the
   * call, or the server's close() ended a hang. A handler holds a response by awaiting before it
   * returns; this is how a test sees the client give up meanwhile.
   */
  abortedAt?: number;
  /** What the server answered (a reply: its full body), once it has; each API narrows `kind`. */
  response?: { kind: string; status?: number; body?: unknown };
}

/** A raw HTTP answer. A string body is sent verbatim (for malformed JSON); others as JSON. */
export interface RawReply {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
}

export function isRaw(r: unknown): r is RawReply {
  return typeof r === 'object' && r !== null && typeof (r as RawReply).status === 'number';
}

/** 'reset' destroys the connection; 'hang' never answers; 'stall' sends 200 and part of a body. */
export type Held = 'reset' | 'hang' | 'stall';

/**
 * A streamed answer (server-sent events), and how it is paced: `delayMs` between events; after
 * `stallAfter` events nothing more is sent (the connection stays open); after `endAfter` the
 * response ends there, cut short.
 */
export interface SseAnswer {
  events: { event: string; data: unknown }[];
  delayMs?: number;
  stallAfter?: number;
  endAfter?: number;
}

/** How a server answers one request. */
export interface Answer {
  send(status: number, body: unknown, headers?: Record<string, string>): void;
  /** Holds the response as `kind` says; `partial` is the stalled body's first part. */
  hold(kind: Held, partial: string, contentType?: string): void;
  /** Sends server-sent events as `sse` paces them. */
  stream(sse: SseAnswer): void;
}

export interface RecordingServer<R> {
  port: number;
  requests: R[];
  /** Requests received so far, `clear()` or not. */
  received(): number;
  /** Resolves when `n` requests have been received in total. */
  waitForRequests(n: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** What a request becomes, the API's way: the test's handler decides, the API shapes. */
export interface ApiShape<R, O extends object> {
  /** Names the server in a timeout. */
  name: string;
  /** The header carrying each answer's request id (`request-id`, `x-request-id`). */
  requestIdHeader: string;
  apiKeyOf(headers: Record<string, string>): string | null;
  /** What the real API would refuse the request for, or null. */
  problemOf(rec: R): { status: number; message: string } | null;
  /** The API's error body for a status and a message. */
  errorBody(status: number, message: string): unknown;
  /** The test's handler: a reply, a raw answer, or a held response. */
  handle(rec: R): O | RawReply | Held | Promise<O | RawReply | Held>;
  /** The first part of a body that stalls (for a streamed request: the events sent before it stalls). */
  stalledBody(rec: R): { body: string; contentType: string };
  /** The full answer for a reply, and the kind it is recorded as; `sse` when it goes out streamed. */
  reply(rec: R, out: O): { kind: string; body: unknown; sse?: SseAnswer };
}

/** Answers one request as the API would, recording what it answered. */
async function answerRequest<R extends RecordedHttpRequest<unknown>, O extends object>(
  rec: R,
  res: Answer,
  api: ApiShape<R, O>,
) {
  const record = (response: RecordedHttpRequest<unknown>['response']) => {
    rec.response = response;
  };
  const problem = api.problemOf(rec);
  if (problem) {
    record({ kind: 'rejected', status: problem.status, body: problem.message });
    return res.send(problem.status, api.errorBody(problem.status, problem.message));
  }
  let out: O | RawReply | Held;
  try {
    out = await api.handle(rec);
  } catch (err) {
    record({ kind: 'raw', status: 500, body: `handler threw: ${(err as Error).message}` });
    return res.send(500, api.errorBody(500, `test handler threw: ${(err as Error).message}`));
  }
  if (typeof out === 'string') {
    record({ kind: out });
    const stalled = api.stalledBody(rec);
    return res.hold(out, stalled.body, stalled.contentType);
  }
  if (isRaw(out)) {
    record({ kind: 'raw', status: out.status, body: out.body });
    return res.send(out.status, out.body, out.headers);
  }
  const { kind, body, sse } = api.reply(rec, out);
  record({ kind, status: 200, body });
  if (sse) res.stream(sse);
  else res.send(200, body);
}

function headersOf(req: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers))
    headers[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : String(v ?? '');
  return headers;
}

function parsed(rawBody: string): unknown {
  try {
    return JSON.parse(rawBody);
  } catch {
    return undefined;
  }
}

/** Requests waited for, each resolved once enough have arrived. */
function waitList(name: string, received: () => number) {
  const waiters: { n: number; resolve: () => void }[] = [];
  return {
    notify() {
      for (const w of [...waiters]) {
        if (received() < w.n) continue;
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    },
    wait(n: number, timeoutMs = 30_000): Promise<void> {
      if (received() >= n) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const t = setTimeout(
          () => reject(new Error(`${name}: ${received()} of ${n} requests after ${timeoutMs} ms`)),
          timeoutMs,
        );
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(t);
            resolve();
          },
        });
      });
    },
  };
}

/** `s` in pieces of `n` characters, as a stream's deltas carry it (one empty piece for ''). */
export const inPieces = (s: string, n: number) =>
  Array.from({ length: Math.max(1, Math.ceil(s.length / n)) }, (_, i) => s.slice(i * n, (i + 1) * n));

/** One server-sent event as the APIs frame it: OpenAI's have no event name, and end with `[DONE]`. */
export const sseFrame = (event: string, data: unknown) =>
  `${event ? `event: ${event}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;

/** Writes the events as `sse` paces them; stops early on a stall, a cut, or a client gone. */
async function sendEvents(res: ServerResponse, sse: SseAnswer): Promise<void> {
  for (const [i, e] of sse.events.entries()) {
    if (res.destroyed) return;
    if (i === sse.stallAfter) return;
    if (i === sse.endAfter) return void res.end();
    if (sse.delayMs && i > 0) await new Promise((r) => setTimeout(r, sse.delayMs));
    if (res.destroyed) return;
    res.write(sseFrame(e.event, e.data));
  }
  res.end();
}

/** The ways one response can go; `held` keeps the open ones, which the server's close() ends. */
function answerOn(
  req: IncomingMessage,
  res: ServerResponse,
  requestId: Record<string, string>,
  held: Set<ServerResponse>,
): Answer {
  const keepOpen = () => {
    held.add(res);
    res.on('close', () => held.delete(res));
  };
  return {
    send(status, body, headers = {}) {
      const payload = typeof body === 'string' ? body : JSON.stringify(body ?? {});
      res.writeHead(status, { 'content-type': 'application/json', ...requestId, ...headers });
      res.end(payload);
    },
    hold(kind, partial, contentType = 'application/json') {
      if (kind === 'reset') return void req.socket.destroy();
      keepOpen();
      if (kind === 'stall') {
        res.writeHead(200, { 'content-type': contentType });
        res.write(partial);
      }
    },
    stream(sse) {
      keepOpen();
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', ...requestId });
      void sendEvents(res, sse);
    },
  };
}

export async function startRecordingServer<R extends RecordedHttpRequest<unknown>, O extends object>(
  opts: ApiShape<R, O>,
): Promise<RecordingServer<R>> {
  const requests: R[] = [];
  const sockets = new Set<Socket>();
  const hanging = new Set<ServerResponse>();
  let counter = 0;
  const waits = waitList(opts.name, () => counter);

  const onRequest = (req: IncomingMessage, res: ServerResponse, rawBody: string) => {
    const headers = headersOf(req);
    const rec = {
      index: counter++,
      method: req.method ?? '',
      path: (req.url ?? '').split('?')[0]!,
      headers,
      apiKey: opts.apiKeyOf(headers),
      rawBody,
      body: parsed(rawBody),
      receivedAt: Date.now(),
    } as R;
    requests.push(rec);
    res.on('close', () => {
      if (!res.writableEnded) rec.abortedAt = Date.now();
    });
    waits.notify();
    const requestId = { [opts.requestIdHeader]: `req_test_${counter}` };
    void answerRequest(rec, answerOn(req, res, requestId, hanging), opts);
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => onRequest(req, res, Buffer.concat(chunks).toString('utf8')));
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });

  return {
    port: (server.address() as AddressInfo).port,
    requests,
    received: () => counter,
    waitForRequests: (n, timeoutMs) => waits.wait(n, timeoutMs),
    async close() {
      for (const r of hanging) r.destroy();
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
