// A provider's streamed events, each mended, as the newline-delimited JSON the SDKs' stream
// helpers read back (`ChatCompletionStream.fromReadableStream`, `MessageStream.fromReadableStream`):
// deepq mends what lax servers send, the SDK still puts the answer together.

/** `events` mended one by one, in order; `heard` is told of each as it arrives (a sign of life). */
export function mendedStream<T>(
  events: AsyncIterable<T>,
  mend: (e: T) => T,
  heard: () => void,
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const iterator = events[Symbol.asyncIterator]();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await iterator.next();
      if (next.done) return controller.close();
      heard();
      controller.enqueue(encoder.encode(`${JSON.stringify(mend(next.value))}\n`));
    },
    async cancel() {
      await iterator.return?.();
    },
  });
}
