// Ports for the test processes' metrics servers: below the ephemeral range (32768+), so
// outgoing connections never hold them, and never one something on the machine already listens
// on (RabbitMQ's 25672 and 15672, PostgreSQL, another test file's services).
import { tcpListeners } from '../cli/private-redis.ts';

/** Ports in LISTEN state on this machine (empty where /proc cannot say). */
export function listeningPorts(): Set<number> {
  return new Set(tcpListeners()?.keys() ?? []);
}

let next = 10000 + Math.floor(Math.random() * 20000);

/** The Fetch standard's "bad ports" in this range: Node's fetch refuses them without connecting. */
const FETCH_BAD_PORTS = new Set([10080]);

/** The next port in 10000–29999 (from a random start per process) that nothing listens on. */
export function nextFreePort(): number {
  const busy = listeningPorts();
  for (;;) {
    next = next >= 30000 ? 10000 : next + 1;
    if (!busy.has(next) && !FETCH_BAD_PORTS.has(next)) return next;
  }
}
