// Ports for the test processes' metrics servers: below the ephemeral range (32768+), so
// outgoing connections never hold them, and never one something on the machine already listens
// on (RabbitMQ's 25672 and 15672, PostgreSQL, another test file's services).
import { readFileSync } from 'node:fs';

const LISTEN = '0A';

/** Ports in LISTEN state on this machine (Linux /proc/net/tcp and tcp6; empty elsewhere). */
export function listeningPorts(): Set<number> {
  const ports = new Set<number>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      if (state === LISTEN && local) ports.add(Number.parseInt(local.split(':').pop()!, 16));
    }
  }
  return ports;
}

let next = 10000 + Math.floor(Math.random() * 20000);

/** The next port in 10000–29999 (from a random start per process) that nothing listens on. */
export function nextFreePort(): number {
  const busy = listeningPorts();
  for (;;) {
    next = next >= 30000 ? 10000 : next + 1;
    if (!busy.has(next)) return next;
  }
}
