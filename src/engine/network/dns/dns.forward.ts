import { createSocket } from 'node:dgram';
import { connect, isIP } from 'node:net';
import { RCODE, readHeader, readQuestion } from './dns.wire.js';

/**
 * Forwarding a query the embedded DNS cannot answer to other servers (the host's resolvers, or a
 * container's Dns), as dockerd's resolver does: the servers in order (at most three), the client's
 * protocol, a timeout per server, the next server after a timeout or a SERVFAIL. A fresh socket per
 * exchange (a random source port), and an answer counts only when its ID and question are the
 * query's.
 */

/** dockerd's resolver asks at most three external servers (maxExtDNS). */
export const MAX_UPSTREAMS = 3;

export interface Upstream {
  host: string;
  port: number;
}

/** `1.2.3.4`, `1.2.3.4:5353`, `::1`, `[::1]:5353`; undefined when none of these. */
export function parseUpstream(text: string): Upstream | undefined {
  if (isIP(text)) return { host: text, port: 53 };
  const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(text) ?? /^([\d.]+):(\d{1,5})$/.exec(text);
  if (!m?.[1] || !isIP(m[1])) return undefined;
  const port = Number(m[2]);
  return port > 0 && port < 65536 ? { host: m[1], port } : undefined;
}

/** Is `reply` the answer to `query` (same ID, a response, same question)? */
export function answers(query: Buffer, reply: Buffer): boolean {
  try {
    const q = readHeader(query);
    const r = readHeader(reply);
    if (!r.response || r.id !== q.id) return false;
    if (q.qdcount === 0) return true;
    if (r.qdcount === 0) return r.rcode !== RCODE.NOERROR;
    const a = readQuestion(query, 12).question;
    const b = readQuestion(reply, 12).question;
    return a.name.toLowerCase() === b.name.toLowerCase() && a.type === b.type && a.class === b.class;
  } catch {
    return false;
  }
}

function udpExchange(up: Upstream, query: Buffer, timeoutMs: number): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    const sock = createSocket(isIP(up.host) === 6 ? 'udp6' : 'udp4');
    let settled = false;
    const done = (reply: Buffer | undefined) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      try {
        sock.close();
      } catch {
        // already closed
      }
      resolve(reply);
    };
    const timer = setTimeout(() => done(undefined), timeoutMs);
    sock.on('error', () => done(undefined));
    sock.on('message', (msg) => {
      if (answers(query, msg)) done(msg);
    });
    // a connect that fails (no route to the server) calls back with its error, and never connects
    sock.connect(up.port, up.host, (err?: Error) => {
      if (err) return done(undefined);
      sock.send(query, (err) => {
        if (err) done(undefined);
      });
    });
  });
}

function tcpExchange(up: Upstream, query: Buffer, timeoutMs: number): Promise<Buffer | undefined> {
  return new Promise((resolve) => {
    const sock = connect({ host: up.host, port: up.port });
    let settled = false;
    let buf: Buffer = Buffer.alloc(0);
    const done = (reply: Buffer | undefined) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      resolve(reply);
    };
    const timer = setTimeout(() => done(undefined), timeoutMs);
    sock.on('error', () => done(undefined));
    sock.on('close', () => done(undefined));
    sock.on('connect', () => {
      const len = Buffer.alloc(2);
      len.writeUInt16BE(query.length, 0);
      sock.write(Buffer.concat([len, query]));
    });
    sock.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      while (buf.length >= 2) {
        const size = buf.readUInt16BE(0);
        if (buf.length < 2 + size) return;
        const msg = buf.subarray(2, 2 + size);
        buf = buf.subarray(2 + size);
        if (answers(query, msg)) return done(Buffer.from(msg));
      }
    });
  });
}

/**
 * The first usable answer from `servers` (in order, at most MAX_UPSTREAMS), over TCP when the
 * client asked over TCP; undefined when none answered in time (the caller answers SERVFAIL).
 */
export async function forwardQuery(
  query: Buffer,
  servers: string[],
  opts: { tcp: boolean; timeoutMs: number },
): Promise<Buffer | undefined> {
  let fallback: Buffer | undefined;
  const ups = servers.map(parseUpstream).filter((u): u is Upstream => u !== undefined);
  for (const up of ups.slice(0, MAX_UPSTREAMS)) {
    const reply = opts.tcp
      ? await tcpExchange(up, query, opts.timeoutMs)
      : await udpExchange(up, query, opts.timeoutMs);
    if (!reply) continue;
    // as dockerd: a server failing is a reason to ask the next one
    if (readHeader(reply).rcode === RCODE.SERVFAIL) {
      fallback ??= reply;
      continue;
    }
    return reply;
  }
  return fallback;
}
