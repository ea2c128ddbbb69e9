import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** The lowest port of the kernel's ephemeral range (the ports it gives outgoing connections). */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 1024 ? low : 32768;
  } catch {
    return 32768;
  }
}

function canListen(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen({ host, port, exclusive: true }, () => s.close(() => resolve(true)));
  });
}

const FLOOR = 10_000;

/**
 * A TCP port nobody listens on on `host` now, for a server a test starts next. Picked at random
 * below the kernel's ephemeral range: a port the kernel picked (listen on 0) is one it may give an
 * outgoing connection, or another test's listen on 0, before the server binds it (seen as
 * EADDRINUSE in CI); a random port under that range is taken in between only by a test picking
 * the same one. Bounded tries, then the kernel's pick.
 */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const top = Math.max(FLOOR + 1000, ephemeralLow());
  for (let i = 0; i < 50; i++) {
    const port = FLOOR + Math.floor(Math.random() * (top - FLOOR));
    if (await canListen(host, port)) return port;
  }
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen({ host, port: 0 }, () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}
