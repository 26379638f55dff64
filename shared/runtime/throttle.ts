// Logging that repeats itself: a message the first time, then at most once per interval per
// key, with how many times it came in between (`repeated`). A worker's fetch errors and the
// tracing SDK's complaints about a collector that does not answer would otherwise flood the log.

/** The cap on keys remembered: the oldest is forgotten past it. */
const KEYS_KEPT = 100;

/** `emit` gets the key, `{ repeated: n }` when n were dropped since, and what this call passed. */
export function throttled<T>(
  everyMs: number,
  emit: (key: string, repeated: Record<string, number>, payload: T) => void,
) {
  const seen = new Map<string, { at: number; repeats: number }>();
  return (key: string, payload: T): void => {
    const now = Date.now();
    const s = seen.get(key);
    if (s && now - s.at < everyMs) {
      s.repeats++;
      return;
    }
    seen.set(key, { at: now, repeats: 0 });
    if (seen.size > KEYS_KEPT) seen.delete(seen.keys().next().value!);
    emit(key, s?.repeats ? { repeated: s.repeats } : {}, payload);
  };
}
