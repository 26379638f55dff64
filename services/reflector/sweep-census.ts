// The sweep's census: a walk over the goal namespace (`<prefix>:goal:*`), the goals index and the
// blob store, one slice per sweep, so that no run reads every kept goal. Its cursors and the pass's
// running byte counts live in one hash (keys.sweepCensus()), shared by reflector replicas: the
// next run, wherever it runs, goes on where the last one stopped. A pass ends when the namespace
// SCAN comes back to cursor 0; then the byte counts are the gauge's, and start again.

import { isGoalId } from '../../shared/goal/ids.ts';
import type { Runtime } from '../../shared/runtime/runtime.ts';

/** SCAN and ZSCAN's COUNT: the slots (members) each call looks at. */
const STEP = 1000;

export interface Census {
  /** Every goal id the slice came upon: the keys' id parts, index members, blob folders. */
  ids: string[];
  /** Goals whose goal hash came up in the slice: each is measured once a pass. */
  hashIds: string[];
  /** The slice's keys of the goal namespace (a doomed goal's stray keys among them). */
  keys: string[];
  /** Goals with a blob folder (the whole store's, when this deployment owns it). */
  blobGoals: ReadonlySet<string>;
  /** The namespace walk came back to its start in this slice. */
  passEnded: boolean;
  /** This slice starts a pass: its byte counts replace whatever an unfinished pass left. */
  passStarted: boolean;
}

/** The goal's id from one of its keys, or '' when the id part is not a goal id. */
export function idOfKey(rt: Runtime, key: string): string {
  const goalPrefix = `${rt.cfg.prefix}:goal:`;
  if (!key.startsWith(goalPrefix)) return '';
  const id = key.slice(goalPrefix.length).split(':')[0]!;
  return isGoalId(id) ? id : '';
}

/** The next slice: about `budget` keys' worth of SCAN, of the index and of the blob store's folders. */
export async function takeCensus(rt: Runtime, budget: number, ownsBlobs: boolean): Promise<Census> {
  const at = await rt.redis.hgetall(rt.goals.keys.sweepCensus());
  const calls = Math.max(1, Math.ceil(budget / STEP));
  const goalPrefix = `${rt.cfg.prefix}:goal:`;
  const walk = await scanSlice(rt, at.keyCursor ?? '0', calls);
  // A goal is one index member and four keys or so: a quarter of the calls keeps both walks in step.
  const index = await indexSlice(rt, at.indexCursor ?? '0', Math.ceil(calls / 4));
  const blobs = ownsBlobs ? await blobSlice(rt, at.blobAfter ?? '', budget) : { all: [], slice: [], after: '' };
  await rt.redis.hset(rt.goals.keys.sweepCensus(), {
    keyCursor: walk.cursor,
    indexCursor: index.cursor,
    blobAfter: blobs.after,
  });
  const ids = new Set([...walk.keys.map((k) => idOfKey(rt, k)), ...index.members, ...blobs.slice]);
  const hashIds = walk.keys.filter((k) => k.startsWith(goalPrefix) && isGoalId(k.slice(goalPrefix.length)));
  return {
    ids: [...ids].filter(isGoalId),
    hashIds: [...new Set(hashIds.map((k) => k.slice(goalPrefix.length)))],
    keys: walk.keys,
    blobGoals: new Set(blobs.all),
    passEnded: walk.cursor === '0',
    passStarted: (at.keyCursor ?? '0') === '0',
  };
}

async function scanSlice(rt: Runtime, from: string, calls: number): Promise<{ cursor: string; keys: string[] }> {
  const keys: string[] = [];
  let cursor = from;
  for (let i = 0; i < calls; i++) {
    const [next, batch] = await rt.redis.scan(cursor, 'MATCH', `${rt.cfg.prefix}:goal:*`, 'COUNT', STEP);
    keys.push(...batch);
    cursor = next;
    if (cursor === '0') break;
  }
  return { cursor, keys };
}

async function indexSlice(rt: Runtime, from: string, calls: number): Promise<{ cursor: string; members: string[] }> {
  const members: string[] = [];
  let cursor = from;
  for (let i = 0; i < calls; i++) {
    const [next, flat] = await rt.redis.zscan(rt.goals.keys.goalsIndex(), cursor, 'COUNT', STEP);
    for (let j = 0; j < flat.length; j += 2) members.push(flat[j]!);
    cursor = next;
    if (cursor === '0') break;
  }
  return { cursor, members };
}

/** The blob store's goal folders (all, for "has a folder"), and the next `budget` after `after`, by name. */
async function blobSlice(rt: Runtime, after: string, budget: number) {
  const all = await rt.vfs.blobs.listGoals();
  const slice = all
    .filter((name) => name > after)
    .sort()
    .slice(0, budget);
  return { all, slice, after: slice.length < budget ? '' : slice.at(-1)! };
}

/**
 * Adds the slice's byte counts to the pass's (the first slice of a pass sets them: a run that
 * died after moving the cursors left a partial count); at the pass's end returns its totals.
 */
export async function saveCensusBytes(
  rt: Runtime,
  census: Census,
  inline: number,
  spilled: number,
): Promise<{ inline: number; spilled: number } | null> {
  const key = rt.goals.keys.sweepCensus();
  if (census.passStarted) await rt.redis.hset(key, 'inline', 0, 'spilled', 0);
  const res = (await rt.redis.pipeline().hincrby(key, 'inline', inline).hincrby(key, 'spilled', spilled).exec()) ?? [];
  if (!census.passEnded) return null;
  return { inline: Number(res[0]?.[1] ?? 0), spilled: Number(res[1]?.[1] ?? 0) };
}
