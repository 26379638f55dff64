// An HTTP MCP server's answer was read whole before anything cut it: one answering a call with
// 400 MB of text took 1.8 GB of the worker's memory (the SDK caps a stdio message at 10 MB, an
// HTTP answer not at all), and an answer still streaming after the call timed out went on
// arriving. Each answer's body is counted as it arrives and given up past the cap: its download
// stops, and the call fails (at once for a JSON answer, at its timeout for a stream).
//
// A call that times out or is cancelled is dropped by the SDK, which tells the server so
// (`notifications/cancelled`), but its request's download went on: the SDK gives the transport's
// fetch no per-call signal. That notice, sent through here, now stops the download it names.
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';

/** The SDK's cap on a stdio message, for HTTP answers too. */
export const MAX_ANSWER_BYTES = 10 * 1024 * 1024;

type RequestId = string | number;

/** The JSON-RPC messages of a POST body (one or a batch); none when it is not JSON. */
function messagesOf(body: unknown): { id?: RequestId; method?: string; params?: { requestId?: RequestId } }[] {
  if (typeof body !== 'string') return [];
  try {
    const parsed = JSON.parse(body) as unknown;
    return (Array.isArray(parsed) ? parsed : [parsed]).filter((m) => m && typeof m === 'object');
  } catch {
    return [];
  }
}

/** Downloads one connection follows at most; past it the oldest can no longer be stopped early. */
const FOLLOWED = 256;

export function cappedFetch(maxBytes = MAX_ANSWER_BYTES, base: FetchLike = fetch): FetchLike {
  // The requests whose answers may be downloading, by JSON-RPC id, oldest first.
  const downloading = new Map<RequestId, AbortController>();
  return async (url, init) => {
    // The long-lived GET stream carries the server's notifications: each of its events is capped.
    if (init?.method !== 'POST') return cappedEvents(await base(url, init), maxBytes);
    const messages = messagesOf(init.body);
    for (const m of messages) {
      const id = m.method === 'notifications/cancelled' ? m.params?.requestId : undefined;
      if (id === undefined) continue;
      downloading.get(id)?.abort(new Error('the call was cancelled'));
      downloading.delete(id);
    }
    const ids = messages.flatMap((m) => (m.id !== undefined && m.method ? [m.id] : []));
    const stop = new AbortController();
    for (const id of ids) downloading.set(id, stop);
    while (downloading.size > FOLLOWED) downloading.delete(downloading.keys().next().value as RequestId);
    const forget = () => {
      for (const id of ids) if (downloading.get(id) === stop) downloading.delete(id);
    };
    const signal = init.signal ? AbortSignal.any([init.signal, stop.signal]) : stop.signal;
    const res = await base(url, { ...init, signal }).catch((err: unknown) => {
      forget();
      throw err;
    });
    if (!res.body) {
      forget();
      return res;
    }
    let seen = 0;
    const counted = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, ctl) {
          seen += chunk.byteLength;
          if (seen <= maxBytes) ctl.enqueue(chunk);
          else ctl.error(new Error(`the server's answer is over ${maxBytes} bytes: given up`));
        },
        flush: forget,
      }),
    );
    return new Response(counted, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/**
 * The GET stream with each server-sent event (up to its blank line) at most `maxBytes`: a server
 * that streamed one endless line there grew the worker's heap with it (800 MB sent, 833 MB of
 * heap). Past the cap the stream fails, and the SDK opens it again.
 */
function cappedEvents(res: Response, maxBytes: number): Response {
  if (!res.body) return res;
  let since = 0;
  let afterNewline = false;
  const counted = res.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, ctl) {
        let boundary = -1;
        for (let i = 0; i < chunk.length; i++) {
          const b = chunk[i];
          if (b === 0x0a) {
            if (afterNewline) boundary = i;
            afterNewline = true;
          } else if (b !== 0x0d) afterNewline = false;
        }
        since = boundary >= 0 ? chunk.length - 1 - boundary : since + chunk.length;
        if (since <= maxBytes) ctl.enqueue(chunk);
        else ctl.error(new Error(`an event on the server's notification stream is over ${maxBytes} bytes: given up`));
      },
    }),
  );
  return new Response(counted, { status: res.status, statusText: res.statusText, headers: res.headers });
}
