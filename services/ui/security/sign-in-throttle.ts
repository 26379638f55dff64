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

  /** Counts a wrong token; the window starts at an address's first failure. */
  async failed(address: string): Promise<void> {
    await this.redis.multi().incr(this.key(address)).expire(this.key(address), this.opts.windowSeconds, 'NX').exec();
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
