import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { connect, createServer } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Logger } from '../../../../src/common/log.js';
import { parseQuery, readHeader, TYPE, WireError } from '../../../../src/engine/network/dns/dns.wire.js';
import { EmbeddedDns } from '../../../../src/engine/network/dns/embedded-dns.js';
import { ipv4Of, listenPair, query, udpAsk } from './dns-client.js';

/**
 * The embedded DNS against bounded random input (a seeded generator: a failure is reproducible
 * from the seed printed): random bytes, and valid queries with bits flipped, cut short, or given
 * compression pointers. It must never throw, answer only with a readable header, and keep
 * answering real queries afterwards.
 */

function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SEED = Number(process.env.DNS_FUZZ_SEED ?? 20261127);
const rand = prng(SEED);
const int = (n: number) => Math.floor(rand() * n);

const SEEDS = [
  query('web', TYPE.A),
  query('web.front', TYPE.AAAA, { edns: 1232 }),
  query('2.0.30.172.in-addr.arpa', TYPE.PTR),
  query('host.example', TYPE.A),
];

function randomPacket(): Buffer {
  const kind = int(4);
  if (kind === 0) return Buffer.from([...Array(int(600))].map(() => int(256)));
  const base = Buffer.from(SEEDS[int(SEEDS.length)] as Buffer);
  if (kind === 1) {
    for (let i = 0, n = 1 + int(8); i < n; i++) {
      const at = int(base.length);
      base[at] = (base[at] as number) ^ (1 << int(8));
    }
    return base;
  }
  if (kind === 2) return base.subarray(0, int(base.length + 1));
  // a compression pointer (or a wild label length) somewhere in the name or the counts
  const at = 4 + int(base.length - 4);
  base[at] = 0xc0 | int(64);
  if (at + 1 < base.length) base[at + 1] = int(256);
  return base;
}

describe(`the embedded DNS under random input (seed ${SEED})`, () => {
  let dns: EmbeddedDns;
  let port = 0;
  before(async () => {
    // no upstream: forwarded queries fail at once (SERVFAIL), so the fuzz stays fast
    dns = new EmbeddedDns({ log: new Logger('error'), upstreams: () => [], timeoutMs: 100 });
    port = (await dns.serve('F', { address: '127.0.0.5', port: 0, domain: 'front' })).port;
    dns.setRecords('F', [{ names: ['web'], ipv4: '172.30.0.2' }]);
  });
  after(() => dns.close());

  it('reads every packet or refuses it with a WireError', () => {
    for (let i = 0; i < 5000; i++) {
      const p = randomPacket();
      try {
        parseQuery(p);
      } catch (err) {
        assert.ok(err instanceof WireError, `packet ${p.toString('hex')}: ${String(err)}`);
      }
    }
  });

  it('answers every packet with a readable message or nothing, never throwing', async () => {
    for (let i = 0; i < 3000; i++) {
      const p = randomPacket();
      const reply = await dns.answer('F', p, '127.0.0.1', i % 2 === 0);
      if (reply) assert.ok(readHeader(reply).response, `packet ${p.toString('hex')}`);
    }
  });

  it('keeps answering over UDP and TCP after random packets and broken TCP streams', async () => {
    const sock = createSocket('udp4');
    for (let i = 0; i < 400; i++) sock.send(randomPacket(), port, '127.0.0.5');
    await new Promise<void>((r) => setTimeout(r, 50));
    sock.close();
    await Promise.all(
      [...Array(20)].map(
        () =>
          new Promise<void>((resolve) => {
            const c = connect({ host: '127.0.0.5', port });
            c.on('error', () => resolve());
            c.on('close', () => resolve());
            c.on('connect', () => {
              const p = randomPacket();
              const len = Buffer.alloc(2);
              // a length prefix that lies about half the time
              len.writeUInt16BE(rand() < 0.5 ? p.length : int(65536), 0);
              c.end(Buffer.concat([len, p]));
              setTimeout(() => c.destroy(), 50);
            });
          }),
      ),
    );
    const r = await udpAsk('127.0.0.5', port, query('web', TYPE.A));
    assert.deepEqual(r.answers.map(ipv4Of), ['172.30.0.2']);
  });

  it('survives upstream servers that answer garbage, over UDP and TCP', async () => {
    // an upstream that answers every query with its ID and question kept and the rest mangled:
    // cut, bits flipped, counts lying, records running past the end
    const mangle = (q: Buffer): Buffer => {
      const reply = Buffer.concat([q, Buffer.from([...Array(int(700))].map(() => int(256)))]);
      reply.writeUInt16BE(0x8180 | int(16), 2);
      reply.writeUInt16BE(int(4), 6);
      reply.writeUInt16BE(int(3), 8);
      reply.writeUInt16BE(int(3), 10);
      for (let i = 0, n = int(4); i < n; i++) {
        const at = 12 + int(reply.length - 12);
        reply[at] = int(256);
      }
      return reply.subarray(0, Math.max(12, int(reply.length + 1)));
    };
    const tcp = createServer((sock) => {
      sock.on('error', () => undefined);
      sock.on('data', (chunk: Buffer) => {
        const reply = mangle(chunk.subarray(2));
        const len = Buffer.alloc(2);
        len.writeUInt16BE(rand() < 0.8 ? reply.length : int(65536), 0);
        sock.end(Buffer.concat([len, reply]));
      });
    });
    const { port: upPort, udp } = await listenPair(tcp, () => {
      const sock = createSocket('udp4');
      sock.on('message', (m, r) => sock.send(mangle(m), r.port, r.address));
      return sock;
    });
    const fwd = new EmbeddedDns({
      log: new Logger('error'),
      upstreams: () => [`127.0.0.1:${upPort}`],
      timeoutMs: 100,
    });
    try {
      for (let i = 0; i < 300; i++) {
        const q = query(`n${i}.example`, i % 3 === 0 ? TYPE.AAAA : TYPE.A, i % 2 ? { edns: 1232 } : {});
        const reply = await fwd.answer('G', q, '127.0.0.1', i % 4 === 0);
        if (reply) assert.ok(readHeader(reply).response);
      }
    } finally {
      await fwd.close();
      udp.close();
      await new Promise<void>((r) => tcp.close(() => r()));
    }
  });
});
