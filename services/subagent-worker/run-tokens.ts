// The tokens a failed attempt's run used, carried from the job to the final-failure hook with
// the error it threw: BullMQ hands that hook the very error, in the same process. An error
// the job never threw (a stalled job's) has none: its event says nothing about tokens.
const spent = new WeakMap<object, number>();

export function noteRunTokens(err: unknown, tokens: number): void {
  if (err !== null && typeof err === 'object') spent.set(err, tokens);
}

/** The tokens noted on the error, or on its cause (a refused call's error made unrecoverable). */
export function runTokensOf(err: unknown): number | undefined {
  if (err === null || typeof err !== 'object') return undefined;
  return spent.get(err) ?? runTokensOf((err as { cause?: unknown }).cause);
}
