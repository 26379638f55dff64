// DNS rebinding: a page on evil.example whose name is made to resolve to 127.0.0.1 reaches a
// loopback inspector as its own origin, so the browser's same-origin rules (and the CSRF check,
// which compares Origin with Host) let it read every goal and post actions. Without a token
// the inspector listens on loopback only, so every honest request names a loopback host:
// any other Host is refused. With a token, the token is what guards it.
import type { MiddlewareHandler } from 'hono';
import type { UiEnv } from '../context.ts';
import { isLoopbackHost } from './bind-policy.ts';

/** The host name of a Host header (`[::1]:8080` → `::1`, `localhost:8080` → `localhost`). */
export function hostName(header: string): string {
  const bracketed = /^\[([^\]]*)\](?::\d+)?$/.exec(header);
  if (bracketed) return bracketed[1]!;
  return header.replace(/:\d+$/, '');
}

/** Without a token: 403 for a request whose Host is not a loopback name. */
export function loopbackHostOnly(token: string | undefined): MiddlewareHandler<UiEnv> {
  return async (c, next) => {
    if (token) return next();
    const host = c.req.header('host') ?? '';
    if (host && isLoopbackHost(hostName(host))) return next();
    return c.text(
      'forbidden: this inspector has no DEEPQ_UI_TOKEN, so it answers only requests addressed to a loopback ' +
        'host (127.0.0.1, localhost, [::1]); set DEEPQ_UI_TOKEN to serve it under another name\n',
      403,
    );
  };
}
