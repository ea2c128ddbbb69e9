import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { connect, createServer, type Server } from 'node:net';
import {
  buildResponse,
  CLASS_IN,
  type Header,
  ipv4Data,
  parseQuery,
  RCODE,
  type ResourceRecord,
  readHeader,
  readQuestion,
  readRecord,
  TYPE,
  writeHeader,
  writeQuestion,
} from '../../../../src/engine/network/dns/dns.wire.js';

/** A small DNS client for the tests: queries in wire form, answers read back. */

export function query(name: string, type: number, opts: { id?: number; edns?: number } = {}): Buffer {
  const header = writeHeader({
    id: opts.id ?? 0x1234,
    response: false,
    opcode: 0,
    authoritative: false,
    truncated: false,
    recursionDesired: true,
    recursionAvailable: false,
    z: 0,
    rcode: 0,
    qdcount: 1,
    ancount: 0,
    nscount: 0,
    arcount: opts.edns ? 1 : 0,
  });
  const parts = [header, writeQuestion({ name, type, class: CLASS_IN })];
  if (opts.edns) {
    const opt = Buffer.alloc(11);
    opt.writeUInt16BE(41, 1);
    opt.writeUInt16BE(opts.edns, 3);
    parts.push(opt);
  }
  return Buffer.concat(parts);
}

export interface Reply {
  header: Header;
  answers: ResourceRecord[];
  raw: Buffer;
}

export function readReply(buf: Buffer): Reply {
  const header = readHeader(buf);
  let pos = 12;
  for (let i = 0; i < header.qdcount; i++) pos = readQuestion(buf, pos).next;
  const answers: ResourceRecord[] = [];
  for (let i = 0; i < header.ancount; i++) {
    const { record, next } = readRecord(buf, pos);
    answers.push(record);
    pos = next;
  }
  return { header, answers, raw: buf };
}

export function udpAsk(host: string, port: number, msg: Buffer, timeoutMs = 3000): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const sock = createSocket(host.includes(':') ? 'udp6' : 'udp4');
    const timer = setTimeout(() => {
      sock.close();
      reject(new Error(`no UDP answer from ${host}:${port}`));
    }, timeoutMs);
    sock.on('message', (m) => {
      clearTimeout(timer);
      sock.close();
      resolve(readReply(m));
    });
    sock.send(msg, port, host);
  });
}

export function tcpAsk(host: string, port: number, msg: Buffer, timeoutMs = 3000): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const sock = connect({ host, port });
    let buf = Buffer.alloc(0);
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`no TCP answer from ${host}:${port}`));
    }, timeoutMs);
    sock.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    sock.on('connect', () => {
      const len = Buffer.alloc(2);
      len.writeUInt16BE(msg.length, 0);
      sock.write(Buffer.concat([len, msg]));
    });
    sock.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        clearTimeout(timer);
        sock.destroy();
        resolve(readReply(buf.subarray(2, 2 + buf.readUInt16BE(0))));
      }
    });
  });
}

export function ipv4Of(r: ResourceRecord): string {
  return [...r.data].join('.');
}

/** A stand-in for the world's DNS: answers `*.example` with 192.0.2.99, tagged by its `tag` address. */
/**
 * A TCP server and a UDP socket on one loopback port, as a DNS server has them. The port is the
 * kernel's choice for TCP; another process may hold it for UDP (tests run side by side), so the
 * pair is tried again on a new port then (a bounded number of times).
 */
export async function listenPair(
  tcp: Server,
  makeUdp: () => UdpSocket,
): Promise<{ port: number; udp: UdpSocket }> {
  for (let attempt = 0; ; attempt++) {
    await new Promise<void>((resolve, reject) => {
      tcp.once('error', reject);
      tcp.listen(0, '127.0.0.1', () => {
        tcp.off('error', reject);
        resolve();
      });
    });
    const addr = tcp.address();
    const port = typeof addr === 'object' && addr ? addr.port : 0;
    const udp = makeUdp();
    try {
      await new Promise<void>((resolve, reject) => {
        udp.once('error', reject);
        udp.bind(port, '127.0.0.1', () => {
          udp.off('error', reject);
          resolve();
        });
      });
      return { port, udp };
    } catch (err) {
      udp.close();
      await new Promise<void>((r) => tcp.close(() => r()));
      if (attempt >= 20 || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    }
  }
}

export class FakeUpstream {
  udp!: UdpSocket;
  tcp!: Server;
  port = 0;
  seen: string[] = [];
  constructor(private readonly tag: string) {}

  reply(msg: Buffer, tcp: boolean): Buffer | undefined {
    const q = parseQuery(msg);
    const name = q.question.name;
    this.seen.push(name);
    if (name.startsWith('slow.')) return undefined;
    if (name.startsWith('fail.')) return buildResponse(q, { rcode: RCODE.SERVFAIL });
    if (!name.endsWith('.example')) return buildResponse(q, { rcode: RCODE.NXDOMAIN });
    if (q.question.type !== TYPE.A) return buildResponse(q, { rcode: RCODE.NOERROR });
    const count = name.startsWith('big.') ? 60 : 1;
    const answers = [...Array(count)].map((_, i) => ({
      name,
      type: TYPE.A,
      class: CLASS_IN,
      ttl: 30,
      data: ipv4Data(i === 0 ? this.tag : `198.51.100.${i}`),
    }));
    // too large for UDP: truncated, as a server does
    return buildResponse(q, { rcode: RCODE.NOERROR, answers, limit: tcp ? undefined : q.udpLimit });
  }

  async start(): Promise<void> {
    this.tcp = createServer((sock) => {
      sock.on('error', () => undefined);
      sock.on('data', (chunk) => {
        const out = this.reply(chunk.subarray(2), true);
        if (!out) return;
        const len = Buffer.alloc(2);
        len.writeUInt16BE(out.length, 0);
        sock.write(Buffer.concat([len, out]));
      });
    });
    const pair = await listenPair(this.tcp, () => {
      const udp = createSocket('udp4');
      udp.on('message', (m, rinfo) => {
        const out = this.reply(m, false);
        if (out) udp.send(out, rinfo.port, rinfo.address);
      });
      return udp;
    });
    this.port = pair.port;
    this.udp = pair.udp;
  }

  async stop(): Promise<void> {
    await new Promise<void>((r) => this.tcp.close(() => r()));
    await new Promise<void>((r) => this.udp.close(() => r()));
  }
}
