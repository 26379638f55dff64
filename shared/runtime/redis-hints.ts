// What a failed Redis connection may mean, where the error alone does not say. No imports: the
// CLI reads it before it loads anything else.

/**
 * A Redis at its maxclients closes each new connection ("max number of clients reached" unread
 * by the client), as does a TLS port spoken to in plain text: the client sees a write fail,
 * which alone names neither.
 */
export function closedHint(message: string): string {
  if (!/EPIPE|ECONNRESET/.test(message)) return '';
  return '; Redis closed each connection: is it at its maxclients limit, or a TLS port reached without rediss://?';
}

/** SELECT refused: the URL's database number is past the server's `databases` (or a cluster). */
export const WRONG_DATABASE = /DB index is out of range|SELECT is not allowed/i;

/** What to do about a refused database number, or '' for any other error. */
export function databaseHint(message: string): string {
  if (!WRONG_DATABASE.test(message)) return '';
  const which = '0 to its `databases` - 1, 0 to 15 by default; only 0 on a cluster';
  return `; the database number at the end of the Redis URL (/N) must be one this Redis has (${which})`;
}

/** What a failed connection may mean, where the error alone does not say (closed, wrong database). */
export const connectHint = (message: string): string => closedHint(message) + databaseHint(message);

/** A password Redis refused, or one it wants and did not get. */
export const WRONG_PASSWORD = /WRONGPASS|NOAUTH|invalid password/i;

/** What to do about a refused password, or '' for any other error. */
export function passwordHint(message: string): string {
  if (!WRONG_PASSWORD.test(message)) return '';
  return '; the password (and user, if any) go in the Redis URL before its host, percent-encoded';
}

let refusal: Error | undefined;
const onFatal: ((err: Error) => void)[] = [];

/**
 * The first refusal of this process's Redis settings (its database or its password), kept as a
 * config error: the failures that follow ("Connection is closed") are its consequence, and the
 * CLI reports this instead, exiting 78 (a restart cannot help). A `fatal` one (a database: its
 * connection is closed for good) is also told to `whenRedisRefused`'s listeners.
 */
export function redisRefusal(err?: Error, fatal = false): Error | undefined {
  if (err && !refusal) {
    refusal = err;
    if (fatal) for (const listener of onFatal) listener(err);
  }
  return refusal;
}

/** For a long-running process that does not fail on its own (the inspector): stop on a fatal refusal. */
export function whenRedisRefused(listener: (err: Error) => void): void {
  onFatal.push(listener);
}
