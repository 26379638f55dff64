// Where a server deepq starts can be reached, and the error for a port another process holds:
// shared by the services' ops servers, the web inspector and the CLI that prints their links.
import { ConfigError } from '../errors.ts';

/** A URL to reach a server bound to `bind` at: loopback for a wildcard, an IPv6 address in brackets. */
export function reachableUrl(bind: string, port: number, path = '/'): string {
  const host = bind === '0.0.0.0' || bind === '::' ? '127.0.0.1' : bind;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}${path}`;
}

/**
 * A config error (exit 78): restarting into a port another process holds cannot help.
 * `what` names the port ("metrics port"), `likely` who may hold it, `fix` the setting to change.
 */
export function portInUse(what: string, port: number, host: string, likely: string, fix: string): ConfigError {
  return new ConfigError(`${what} ${port} on ${host} is in use (${likely}, on this machine?): ${fix}`);
}
