// An HTTP MCP server's answer was read whole before anything cut it: one answering a call with
// 400 MB of text took 1.8 GB of the worker's memory (the SDK caps a stdio message at 10 MB, an
// HTTP answer not at all), and an answer still streaming after the call timed out went on
// arriving. Each answer's body is counted as it arrives and given up past the cap: its download
// stops, and the call fails (at once for a JSON answer, at its timeout for a stream).
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';

/** The SDK's cap on a stdio message, for HTTP answers too. */
export const MAX_ANSWER_BYTES = 10 * 1024 * 1024;

export function cappedFetch(maxBytes = MAX_ANSWER_BYTES, base: FetchLike = fetch): FetchLike {
  return async (url, init) => {
    const res = await base(url, init);
    // The long-lived GET stream carries the server's notifications, not answers: not capped.
    if (init?.method !== 'POST' || !res.body) return res;
    let seen = 0;
    const counted = res.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, ctl) {
          seen += chunk.byteLength;
          if (seen <= maxBytes) ctl.enqueue(chunk);
          else ctl.error(new Error(`the server's answer is over ${maxBytes} bytes: given up`));
        },
      }),
    );
    return new Response(counted, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}
