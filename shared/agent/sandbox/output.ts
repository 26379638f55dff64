// A stream's last bytes: what a run printed is kept as a bounded tail (the model needs the end
// of a traceback, not 50 MB), with a count of what was dropped before it.

export class Tail {
  private chunks: Buffer[] = [];
  private held = 0;
  /** Every byte the stream produced, kept or not. */
  total = 0;

  constructor(private readonly keep: number) {}

  push(chunk: Buffer): void {
    this.total += chunk.length;
    this.chunks.push(chunk);
    this.held += chunk.length;
    // Trim only once twice the tail is held: one copy per `keep` bytes, not one per chunk.
    if (this.held > 2 * this.keep) this.compact();
  }

  private compact(): void {
    const all = Buffer.concat(this.chunks);
    const last = all.subarray(Math.max(0, all.length - this.keep));
    this.chunks = [Buffer.from(last)];
    this.held = last.length;
  }

  /** The kept text (the last `keep` bytes, a cut multi-byte character shown as U+FFFD). */
  text(): string {
    this.compact();
    return this.chunks[0]?.toString('utf8') ?? '';
  }

  /** Bytes produced but no longer held. */
  dropped(): number {
    return this.total - Math.min(this.total, this.keep);
  }
}
