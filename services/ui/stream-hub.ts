// Live goal timelines for the inspector: one blocking Redis connection per watched stream
// (XREAD BLOCK, never polling), shared by every viewer of that goal in this process, opened
// for the first viewer and closed after the last. A viewer joins at any stream id: what it
// missed is read with XRANGE, live entries that land meanwhile are held back, so each viewer
// sees every entry after its id exactly once, in order.
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';

export interface StreamEntry {
  id: string;
  fields: string[];
}
export type Deliver = (entries: StreamEntry[]) => void;

/** `<ms>-<seq>`: a stream id deepq can resume from; anything else means "from the start". */
const STREAM_ID_RE = /^\d{1,20}-\d{1,20}$/;
const FROM_START = '0-0';
const PAGE = 500;
/** A blocking read returns at least this often, so a closed feed's loop ends promptly. */
const BLOCK_MS = 15_000;
const RETRY_MS = 1000;

export function normalizeStreamId(id: string | undefined | null): string {
  return id && STREAM_ID_RE.test(id) ? id : FROM_START;
}

/** Orders two stream ids (-1, 0, 1). */
export function compareStreamIds(a: string, b: string): number {
  const [am, as] = a.split('-').map(BigInt) as [bigint, bigint];
  const [bm, bs] = b.split('-').map(BigInt) as [bigint, bigint];
  if (am !== bm) return am < bm ? -1 : 1;
  return as === bs ? 0 : as < bs ? -1 : 1;
}

interface Watcher {
  lastId: string;
  /** Live entries held back while the watcher catches up. */
  held: StreamEntry[] | null;
  deliver: Deliver;
}

function toEntries(rows: [string, string[]][]): StreamEntry[] {
  return rows.map(([id, fields]) => ({ id, fields }));
}

/** Hands a watcher the entries after its last id, and moves the id on. */
function handTo(w: Watcher, entries: StreamEntry[]): void {
  const fresh = entries.filter((e) => compareStreamIds(e.id, w.lastId) > 0);
  if (!fresh.length) return;
  w.lastId = fresh[fresh.length - 1]!.id;
  w.deliver(fresh);
}

/** One stream, one blocking connection, any number of watchers. */
class StreamFeed {
  readonly watchers = new Set<Watcher>();
  private closed = false;
  constructor(
    readonly key: string,
    /** The last id the blocking reader has handed out: every later entry reaches the watchers. */
    public cursor: string,
    private readonly reader: Redis,
    private readonly log: Logger,
  ) {}

  start(): void {
    void this.loop();
  }

  private async loop(): Promise<void> {
    while (!this.closed) {
      try {
        const res = (await this.reader.xread('COUNT', PAGE, 'BLOCK', BLOCK_MS, 'STREAMS', this.key, this.cursor)) as
          | [string, [string, string[]][]][]
          | null;
        if (this.closed || !res?.[0]) continue;
        const entries = toEntries(res[0][1]);
        if (!entries.length) continue;
        this.cursor = entries[entries.length - 1]!.id;
        for (const w of this.watchers) {
          if (w.held) w.held.push(...entries);
          else handTo(w, entries);
        }
      } catch (err) {
        if (this.closed) return;
        // ioredis re-sends a read cut by a lost connection; anything else is worth a line.
        this.log.warn({ err: { message: (err as Error).message }, key: this.key }, 'stream read failed; retrying');
        await new Promise((r) => setTimeout(r, RETRY_MS).unref());
      }
    }
  }

  close(): void {
    this.closed = true;
    // Ends the blocking read at once; the loop sees `closed` and stops.
    this.reader.disconnect();
  }
}

export class StreamHub {
  private readonly feeds = new Map<string, StreamFeed>();
  constructor(
    /** For XRANGE catch-up reads (never blocks). */
    private readonly redis: Redis,
    /** Opens a dedicated connection for one stream's blocking reads. */
    private readonly openReader: (key: string) => Redis,
    private readonly log: Logger,
  ) {}

  /** How many streams have a blocking reader open now. */
  get openFeeds(): number {
    return this.feeds.size;
  }

  /**
   * Delivers every entry of `key` after `afterId` (from the start when absent or malformed),
   * then each new one as it lands. Returns the unsubscribe function.
   */
  async subscribe(key: string, afterId: string | undefined, deliver: Deliver): Promise<() => void> {
    const from = normalizeStreamId(afterId);
    let feed = this.feeds.get(key);
    if (!feed) {
      // The reader starts at the stream's end: what comes before it is caught up below, so this
      // call returns with every entry up to now handed out (a page's state follows them).
      const end = await this.streamEnd(key, from);
      feed = this.feeds.get(key); // made by another call meanwhile
      if (!feed) {
        feed = new StreamFeed(key, end, this.openReader(key), this.log);
        this.feeds.set(key, feed);
        feed.start();
      }
    }
    const watcher: Watcher = { lastId: from, held: [], deliver };
    // Taken synchronously with joining: the reader has handed out everything up to here
    // (to others), and will hand this watcher everything after it.
    const upTo = feed.cursor;
    feed.watchers.add(watcher);
    const unsubscribe = () => this.leave(feed, watcher);
    try {
      await this.catchUp(key, watcher, upTo);
    } catch (err) {
      unsubscribe();
      throw err;
    }
    const held = watcher.held ?? [];
    watcher.held = null;
    handTo(watcher, held);
    return unsubscribe;
  }

  /** The id of the stream's last entry, or `from` if that is later (or the stream is empty). */
  private async streamEnd(key: string, from: string): Promise<string> {
    const last = ((await this.redis.xrevrange(key, '+', '-', 'COUNT', 1)) as [string, string[]][])[0]?.[0];
    return last && compareStreamIds(last, from) > 0 ? last : from;
  }

  private async catchUp(key: string, w: Watcher, upTo: string): Promise<void> {
    while (compareStreamIds(w.lastId, upTo) < 0) {
      const rows = (await this.redis.xrange(key, `(${w.lastId}`, upTo, 'COUNT', PAGE)) as [string, string[]][];
      if (!rows.length) return;
      handTo(w, toEntries(rows));
    }
  }

  private leave(feed: StreamFeed, w: Watcher): void {
    feed.watchers.delete(w);
    if (feed.watchers.size > 0 || this.feeds.get(feed.key) !== feed) return;
    this.feeds.delete(feed.key);
    feed.close();
  }

  close(): void {
    for (const feed of this.feeds.values()) feed.close();
    this.feeds.clear();
  }
}
