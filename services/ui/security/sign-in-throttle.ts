// Brute force of DEEPQ_UI_TOKEN: wrong tokens (a sign-in form post, a Bearer header) are
// counted per client address in Redis, so every replica sees the same count. Past
// `uiSignInMaxFailures` within `uiSignInWindowSeconds` of the first, that address is refused
// (429, Retry-After) any token, the right one too, until the window ends: a guess that lands
// during the lockout must not tell the guesser it was right. A signed-in session is not
// affected. The address is the TCP peer's (a forwarded-for header is the client's to forge).
import type { Context } from 'hono';
import type { Redis } from 'ioredis';

export interface SignInThrottleOptions {
  maxFailures: number;
  windowSeconds: number;
}

export class SignInThrottle {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly opts: SignInThrottleOptions,
  ) {}

  private key(address: string): string {
    return `${this.prefix}:ui:sign-in-failures:${address}`;
  }

  /** Seconds this address must wait before presenting a token again; 0 when it may now. */
  async lockedFor(address: string): Promise<number> {
    const [[, count], [, ttl]] = ((await this.redis.multi().get(this.key(address)).ttl(this.key(address)).exec()) ??
      []) as [unknown, unknown][];
    if (Number(count ?? 0) < this.opts.maxFailures) return 0;
    return Math.max(1, Number(ttl ?? 0));
  }

  /**
   * Counts a wrong token; the window starts at an address's first failure. Returns the seconds
   * to wait when this failure is past the limit (0 while it is within): a wrong token is
   * counted before anything answers it, so guesses sent at once cannot all pass a check that
   * read the count first (300 at once were all answered 401 against a limit of 20). The right
   * token is let in only while the count is under the limit (`lockedFor`), which every wrong
   * guess counted before it raised.
   */
  async failed(address: string): Promise<number> {
    const key = this.key(address);
    const res = (await this.redis.multi().incr(key).expire(key, this.opts.windowSeconds, 'NX').ttl(key).exec()) ?? [];
    const [count, ttl] = [Number(res[0]?.[1] ?? 0), Number(res[2]?.[1] ?? 0)];
    return count > this.opts.maxFailures ? Math.max(1, ttl) : 0;
  }
}

/** The TCP peer's address, reduced to the characters an IPv4 or IPv6 address uses. */
export function clientAddress(c: Context): string {
  const incoming = (c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)?.incoming;
  const address = incoming?.socket?.remoteAddress ?? 'unknown';
  return address.replace(/[^0-9A-Za-z:.]/g, '').slice(0, 64) || 'unknown';
}

/** The 429 answer to an address past its failures. */
export function tooManyFailures(c: Context, seconds: number): Response {
  c.header('retry-after', String(seconds));
  return c.text(`too many wrong tokens from this address: try again in ${seconds} s\n`, 429);
}
