// Where the inspector may listen. It can cancel and resume goals and shows everything the
// models wrote, so off the loopback interface it needs DEEPQ_UI_TOKEN.
import { isIP } from 'node:net';
import { ConfigError } from '../../../shared/errors.ts';

/** A token shorter than this is refused: it guards actions on every goal. */
export const MIN_TOKEN_LENGTH = 16;

export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h === '::1') return true;
  const v4 = h.startsWith('::ffff:') ? h.slice(7) : h;
  return isIP(v4) === 4 && v4.startsWith('127.');
}

/** Throws ConfigError (exit 78) when the bind address and the token do not go together. */
export function checkBindPolicy(host: string, token: string | undefined): void {
  if (token !== undefined && token.length < MIN_TOKEN_LENGTH) {
    throw new ConfigError(`DEEPQ_UI_TOKEN is ${token.length} characters: use at least ${MIN_TOKEN_LENGTH}`);
  }
  if (!token && !isLoopbackHost(host)) {
    throw new ConfigError(
      `refusing to listen on ${host} without DEEPQ_UI_TOKEN: off the loopback interface every request ` +
        'must carry a token (set DEEPQ_UI_TOKEN, or use --host 127.0.0.1)',
    );
  }
}
