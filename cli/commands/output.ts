// What the commands write to stdout: plain lines, and a followed goal's progress.
import { followingOnItsOwn } from '../connect.ts';
import type { GoalClient } from '../goal-client.ts';
import { DEFAULT_LOST_LIMIT_MS } from '../redis-patience.ts';
import { fitLine, safeJson, safeLine } from '../terminal.ts';
import { formatEventLine, TimelineView } from '../timeline.ts';

/**
 * Writes one line. Whatever it holds (goal text, reasons, names: written by a user or a model)
 * reaches the terminal with its control characters escaped, never as terminal commands.
 */
export const print = (s: string) => process.stdout.write(`${safeLine(s)}\n`);

/** Writes a value as JSON (pretty with `indent`), C1 controls escaped too. */
export const printJson = (value: unknown, indent?: number) => process.stdout.write(`${safeJson(value, indent)}\n`);

/** `tree` redraws the timeline in place (a TTY), `lines` prints one line per event, `none` is silent. */
export type FollowMode = 'tree' | 'lines' | 'none';

/** Says on stderr that Redis went away, or came back (stdout keeps the goal's progress). */
const tell = (message: string) => process.stderr.write(`${safeLine(`deepq: ${message}`)}\n`);

/**
 * Shows a goal's progress until it is terminal or awaiting a human; returns that status.
 * Without Redis for `redisTimeoutMs`, throws (having said so on stderr after a few seconds).
 */
export async function follow(
  c: GoalClient,
  goalId: string,
  mode: FollowMode,
  redisTimeoutMs?: number,
): Promise<string> {
  // From here on Redis's absence is judged by the follow's own limit (redisTimeoutMs).
  followingOnItsOwn();
  const stopFollowing = () => {
    const hint = `deepq cancel ${goalId} stops it, deepq watch ${goalId} follows it again`;
    process.stderr.write(`\ndeepq: stopped following; goal ${goalId} goes on (${hint})\n`);
    process.exit(130);
  };
  // Ctrl-C stops the following, not the goal: say so, or it reads as a cancel.
  process.once('SIGINT', stopFollowing);
  try {
    return await followEvents(c, goalId, mode, redisTimeoutMs);
  } finally {
    process.off('SIGINT', stopFollowing);
  }
}

async function followEvents(c: GoalClient, goalId: string, mode: FollowMode, redisTimeoutMs?: number) {
  const view = new TimelineView(goalId);
  const redis = { limitMs: redisTimeoutMs ?? DEFAULT_LOST_LIMIT_MS, onLost: tell, onBack: tell };
  const unplanned = unplannedHint(c, goalId);
  let t0 = 0;
  let drawn = 0;
  let status = '';
  for await (const { events, goal } of c.follow(goalId, { pollMs: 150, redis, onPoll: unplanned })) {
    for (const { event } of events) {
      // Times are relative to the first event, normally `created`.
      if (!t0) t0 = event.at;
      view.apply(event);
      if (mode === 'lines') print(formatEventLine(event, t0, goalId));
    }
    // Redraw only on news, but draw once even for a goal with no events yet.
    if (mode === 'tree' && (events.length || !drawn)) drawn = redraw(view.render(), drawn);
    status = goal.status;
  }
  return status;
}

/** How long a followed goal may wait for its first plan before the user is told why it may. */
export const UNPLANNED_HINT_MS = 20_000;

/**
 * Says once on stderr when a goal still waits for its first plan after a while and no planner is
 * connected to its queue (or Redis will not say: CLIENT LIST disabled): with no services running
 * a follow waited in silence, forever. A planner that is there but busy is no news.
 */
function unplannedHint(c: GoalClient, goalId: string, afterMs = UNPLANNED_HINT_MS) {
  let checked = false;
  return async (goal: { status: string; step: number; createdAt: number }) => {
    // From the goal's creation: `watch` of a goal enqueued long ago says so at once.
    const waitedMs = Date.now() - goal.createdAt;
    if (checked || goal.status !== 'queued' || goal.step > 0 || waitedMs < afterMs) return;
    checked = true;
    // Loaded by the goal client already; not at `deepq --help`, which loads this module.
    const { PLAN_QUEUE } = await import('../../shared/runtime/queues.ts');
    const workers = await c.queues
      .get(PLAN_QUEUE)
      .getWorkers()
      .catch(() => undefined);
    // CLIENT LIST shows every database's clients: a planner on another one plans other goals.
    const db = String(c.redis.options.db ?? 0);
    const planners = workers?.filter((w) => w.db === undefined || w.db === db).length;
    if (planners) return;
    const why = whyUnplanned(db, workers);
    const waited = `goal ${goalId} has waited ${Math.round(waitedMs / 1000)} s for its first plan`;
    tell(`${waited}: ${why} (deepq up starts the services)`);
  };
}

function whyUnplanned(db: string, workers: { db?: string }[] | undefined): string {
  if (!workers) return 'is a planner running?';
  const elsewhere = [...new Set(workers.map((w) => w.db))].sort();
  if (!elsewhere.length) return 'no planner is connected to this Redis';
  const only = `only to database ${elsewhere.join(', ')}`;
  return `no planner is connected to database ${db} of this Redis, ${only}: is REDIS_URL the services' one?`;
}

/** Where the tree is drawn: stdout, or a test's stand-in. */
export interface Screen {
  columns?: number;
  write(s: string): unknown;
}

/**
 * Replaces the `drawn` lines written last with `text` (the view's render, whose every line is
 * already escaped); returns how many lines it wrote. Each line is cut to the terminal's width:
 * a wrapped line would take rows the next redraw does not move up over. These are the only
 * escapes deepq emits.
 */
export function redraw(text: string, drawn: number, screen: Screen = process.stdout): number {
  const lines = text.split('\n').map((line) => fitLine(line, screen.columns));
  // Cursor up `drawn` lines to column 0, then clear to the end of the screen.
  if (drawn) screen.write(`\x1b[${drawn}F\x1b[J`);
  screen.write(`${lines.join('\n')}\n`);
  return lines.length;
}
