// A push-to-pull bridge: the stream hub pushes batches from its reader, one SSE response
// pulls them in order with `for await`. Closing ends the iteration (client gone, shutdown).
// Bounded: a client that stops reading while its connection stays open would otherwise make the
// queue (and the process's memory) grow for as long as the goal's stream does.
export class AsyncQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private wake: (() => void) | undefined;
  private closed = false;
  private size = 0;

  /** Past `limit` (counted by `sizeOf`: 1 an item by default) it closes and calls `onOverflow`. */
  constructor(
    private readonly limit = Number.POSITIVE_INFINITY,
    private readonly onOverflow: () => void = () => {},
    private readonly sizeOf: (item: T) => number = () => 1,
  ) {}

  push(item: T): void {
    if (this.closed) return;
    this.size += this.sizeOf(item);
    if (this.size > this.limit) {
      this.items.length = 0;
      this.close();
      this.onOverflow();
      return;
    }
    this.items.push(item);
    this.wake?.();
  }

  /** Closed: nothing more will be pulled (the client left, or the process stops). */
  get isClosed(): boolean {
    return this.closed;
  }

  close(): void {
    this.closed = true;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      const item = this.items.shift();
      if (item !== undefined) {
        // It counts until the consumer is done with it: a batch stuck half-written to a client
        // that stopped reading is still held in memory.
        yield item;
        this.size -= this.sizeOf(item);
        continue;
      }
      if (this.closed) return;
      await new Promise<void>((r) => {
        this.wake = r;
      });
      this.wake = undefined;
    }
  }
}
