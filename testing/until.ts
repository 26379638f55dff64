// Waiting on a condition in tests: the one poll loop the harnesses share.

/** Polls `fn` until it is truthy and returns its value; throws after `timeoutMs`, naming `what`. */
export async function until<T>(
  fn: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 30_000,
  what = 'condition',
  everyMs = 20,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
