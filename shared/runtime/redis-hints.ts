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
