// GET /goals/:id/events: the Goal page's live feed (Server-Sent Events). Fed by the goal's
// Redis stream through the stream hub (XREAD BLOCK, no polling). Each timeline entry goes out
// as a `timeline` event with its stream id, carrying the changed cycle (its plan's instructions
// only when this feed has not sent them yet); after a batch a
// `goal` event carries a fresh snapshot (at most one a second). A reconnecting EventSource sends Last-Event-ID and
// gets exactly what it missed: the feed replays the stream to rebuild the cycles and sends
// only the entries after that id. With Redis down the stream still opens (a `waiting` event)
// and follows once Redis is back: a browser reconnecting during an outage never gives up.
import type { Hono } from 'hono';
import { type SSEStreamingApi, streamSSE } from 'hono/streaming';
import { formatEventLine } from '../../../cli/timeline.ts';
import { isGoalId } from '../../../shared/goal/ids.ts';
import { AsyncQueue } from '../async-queue.ts';
import type { UiContext, UiEnv } from '../context.ts';
import { attachPlans } from '../model/cycle-plans.ts';
import { goalSnapshot } from '../model/goal-snapshot.ts';
import { type CycleView, GoalTimeline } from '../model/goal-timeline.ts';
import { eventOf } from '../model/timeline-entry.ts';
import { sessionCheck } from '../security/auth.ts';
import { compareStreamIds, normalizeStreamId, type StreamEntry } from '../stream-hub.ts';

const KEEPALIVE_MS = 15_000;
/**
 * How often the feed re-reads the goal: moves into planning or reflecting and a planner's or
 * reflector's usage write no timeline entry, and a swept goal's stream must end. Each read that
 * Redis answers sends a `beat`: a page that hears none for a while says it is not updating.
 */
const GOAL_REFRESH_MS = 2000;
/** Timeline entries waiting for one client to read them before it is let go (a live page reads at once). */
const MAX_QUEUED_ENTRIES = 2000;
/**
 * The least time between two snapshots of the goal after new entries: a busy goal writes many
 * entries a second, and each snapshot (its artifacts, usage, decisions) is tens of KB to render.
 */
const SNAPSHOT_MIN_MS = 1000;
/** How long a browser waits before reconnecting after the stream drops. */
const RETRY_MS = 1000;
/** How long the route waits for Redis before it opens the stream anyway. */
const PROBE_MS = 1000;

interface Feed {
  ctx: UiContext;
  goalId: string;
  /** The last entry the browser has: nothing up to it is sent again. */
  after: string;
  stream: SSEStreamingApi;
  /** The goal's state as last sent (status, update time, tokens): a refresh sends only a change. */
  sentState?: string;
  /** A re-read of the goal waits in the relay's queue. */
  refreshQueued?: boolean;
  /** When the last snapshot went out, and the timer of one owed since (entries came sooner). */
  snapshotAt?: number;
  owed?: NodeJS.Timeout;
  /** Whether the browser's session still holds (signed in with a cookie): checked at each re-read. */
  stillSignedIn?: () => Promise<boolean>;
}

export function registerGoalEventsRoute(app: Hono<UiEnv>, ctx: UiContext): void {
  app.get('/goals/:id/events', async (c) => {
    const goalId = c.req.param('id');
    if (!isGoalId(goalId)) return c.text('unknown goal\n', 404);
    // Redis down or restarting: the stream opens anyway and waits for it. Any other answer than
    // 200 text/event-stream makes the browser's EventSource give up for good.
    const known = await goalKnown(ctx, goalId);
    if (known === false) return c.text('unknown goal\n', 404);
    const after = normalizeStreamId(c.req.header('last-event-id') ?? c.req.query('after'));
    // Proxies (nginx) must not buffer the stream.
    c.header('x-accel-buffering', 'no');
    const stillSignedIn = sessionCheck(c, ctx.sessions);
    return streamSSE(c, (stream) => follow({ ctx, goalId, after, stream, stillSignedIn }, known === undefined));
  });
}

/** Whether the goal exists; undefined when Redis does not answer in time (or fails). */
async function goalKnown(ctx: UiContext, goalId: string): Promise<boolean | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((r) => {
    timer = setTimeout(() => r(undefined), PROBE_MS);
  });
  const found = ctx.client.goals.get(goalId).then(
    (g) => g !== null,
    () => undefined,
  );
  try {
    return await Promise.race([found, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function follow(f: Feed, waitingForRedis: boolean): Promise<void> {
  const { ctx, stream } = f;
  // A client that stops reading is let go: its browser reconnects and catches up from Redis.
  const dropSlowClient = () => {
    ctx.log.warn({ goalId: f.goalId, queued: MAX_QUEUED_ENTRIES }, 'live stream client not reading: closing it');
    stream.abort();
  };
  // Only entries the browser lacks count: the replay of what it has (to rebuild the cycles) is
  // bounded by the stream's own length and costs no writes, however long the goal has run.
  const toSend = (b: StreamEntry[]) => b.filter((e) => compareStreamIds(e.id, f.after) > 0).length;
  const batches = new AsyncQueue<StreamEntry[]>(MAX_QUEUED_ENTRIES, dropSlowClient, toSend);
  const live = { close: () => batches.close() };
  ctx.liveStreams.add(live);
  ctx.metrics.liveStreams.inc();
  stream.onAbort(() => batches.close());
  const keepalive = setInterval(() => void stream.write(': keep-alive\n\n'), KEEPALIVE_MS);
  // The relay re-reads the goal at each empty batch: one writer, so an older snapshot read by a
  // timer never lands after a newer one the relay sent (the page stayed on it).
  const refresh = setInterval(() => {
    if (f.refreshQueued) return; // one at a time: a stuck client must not pile them up
    f.refreshQueued = true;
    batches.push([]);
  }, GOAL_REFRESH_MS);
  let unsubscribe = () => {};
  try {
    // The first message sets how soon the browser reconnects after a drop.
    await stream.writeSSE({ event: 'hello', data: '{}', retry: RETRY_MS });
    // The page says what it waits for: Redis, not the inspector.
    if (waitingForRedis) await stream.writeSSE({ event: 'waiting', data: JSON.stringify({ for: 'redis' }) });
    unsubscribe = await subscribe(f, batches);
    ctx.metrics.streamReaders.set(ctx.hub.openFeeds);
    // A goal swept meanwhile: the stream ends, and the browser's reconnect gets a 404.
    if (batches.isClosed) return;
    if (!(await ctx.client.goals.get(f.goalId))) return void (await goneFor(f));
    // Its state goes out after what the browser missed (queued by now): a finished goal's state
    // ahead of its last entries made the page stop before them.
    batches.push([]);
    await relay(f, batches);
  } finally {
    clearInterval(keepalive);
    clearInterval(refresh);
    clearTimeout(f.owed);
    unsubscribe();
    ctx.liveStreams.delete(live);
    ctx.metrics.liveStreams.dec();
    ctx.metrics.streamReaders.set(ctx.hub.openFeeds);
  }
}

/**
 * Follows the goal's stream (from the start: the cycles are rebuilt from every entry, the
 * browser gets only new ones), trying again while Redis fails, until the client leaves.
 */
async function subscribe(f: Feed, batches: AsyncQueue<StreamEntry[]>): Promise<() => void> {
  const key = f.ctx.client.goals.keys.events(f.goalId);
  while (!batches.isClosed) {
    try {
      return await f.ctx.hub.subscribe(key, undefined, (entries) => batches.push(entries));
    } catch (err) {
      f.ctx.log.warn({ err: { message: (err as Error).message }, goalId: f.goalId }, 'cannot follow yet; retrying');
      await new Promise((r) => setTimeout(r, RETRY_MS).unref());
    }
  }
  return () => {};
}

/** Sends each new entry with the cycle it changed, then the goal's state after the batch. */
async function relay(f: Feed, batches: AsyncQueue<StreamEntry[]>): Promise<void> {
  const timeline = new GoalTimeline();
  const planned = new Set<number>();
  const sentPlans = new Map<number, string>();
  // Times count from the goal's creation, as on the page (its first entries may be trimmed).
  let t0 = (await f.ctx.client.goals.get(f.goalId).catch(() => null))?.createdAt;
  for await (const batch of batches) {
    // The timer's re-read: a changed goal is sent; a goal swept meanwhile ends the stream.
    if (!batch.length) {
      f.refreshQueued = false;
      // Signed out (or past its 12 hours) since: the stream ends, and the browser's reconnect gets a 401.
      if (f.stillSignedIn && !(await f.stillSignedIn().catch(() => true))) return;
      // An owed snapshot goes out whatever changed (artifacts change no goal field); else only a change.
      const read = await sendGoal(f, !f.owed).catch(() => null);
      if (read === false) return;
      // Redis answered: the page hears it (its keep-alive comments say nothing of Redis).
      if (read) await f.stream.writeSSE({ event: 'beat', data: '1' });
    }
    let sent = false;
    for (const entry of batch) {
      const event = eventOf(entry.fields);
      if (!event) continue;
      t0 ??= event.at;
      const step = timeline.apply(event);
      if (compareStreamIds(entry.id, f.after) <= 0) continue;
      if (step !== undefined && !planned.has(step)) {
        planned.add(step);
        const goal = await f.ctx.client.goals.get(f.goalId);
        if (goal) await attachPlans(f.ctx, goal, timeline, [step]);
      }
      const cycle = step === undefined ? null : cycleToSend(timeline.get(step), sentPlans);
      const data = JSON.stringify({ line: formatEventLine(event, t0, f.goalId), cycle });
      await f.stream.writeSSE({ event: 'timeline', id: entry.id, data });
      sent = true;
    }
    if (sent && !(await sendGoalSoon(f, batches))) return;
    if (f.stream.aborted) return;
  }
}

/**
 * The cycle as sent: its plan's instructions and read files (up to 5 × 20,000 characters) only
 * when they changed since this feed last sent them; else left out and `planSent` set, and the
 * page keeps the ones it has (each tool call's count resent them all: 99 KB a call).
 */
function cycleToSend(
  cycle: CycleView | undefined,
  sentPlans: Map<number, string>,
): (CycleView & { planSent?: true }) | null {
  if (!cycle) return null;
  const plan = JSON.stringify(cycle.subtasks.map((s) => [s.index, s.instruction, s.readFiles]));
  if (sentPlans.get(cycle.step) !== plan) {
    sentPlans.set(cycle.step, plan);
    return cycle;
  }
  const subtasks = cycle.subtasks.map(({ instruction: _, readFiles: __, ...rest }) => rest);
  return { ...cycle, subtasks, planSent: true };
}

/** The goal's snapshot after new entries: now, or (one sent less than a second ago) owed until then. */
async function sendGoalSoon(f: Feed, batches: AsyncQueue<StreamEntry[]>): Promise<boolean> {
  const wait = (f.snapshotAt ?? 0) + SNAPSHOT_MIN_MS - Date.now();
  if (wait <= 0) return sendGoal(f);
  f.owed ??= setTimeout(() => batches.push([]), wait);
  return true;
}

/** The goal was swept or expired: the page says so, and stops (its reconnect would get a 404). */
async function goneFor(f: Feed): Promise<false> {
  await f.stream.writeSSE({ event: 'gone', data: '{}' }).catch(() => {});
  return false;
}

/** Sends the goal's state (only if it changed, with `onlyIfChanged`); false when the goal is gone. */
async function sendGoal(f: Feed, onlyIfChanged = false): Promise<boolean> {
  const goal = await f.ctx.client.goals.get(f.goalId);
  if (!goal) return goneFor(f);
  const state = JSON.stringify([goal.status, goal.updatedAt, goal.tokens]);
  if (onlyIfChanged && state === f.sentState) return true;
  f.sentState = state;
  clearTimeout(f.owed);
  f.owed = undefined;
  f.snapshotAt = Date.now();
  await f.stream.writeSSE({ event: 'goal', data: JSON.stringify(await goalSnapshot(f.ctx, goal)) });
  return true;
}
