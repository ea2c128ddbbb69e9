import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { createServer as createTcpServer, isIP, type Socket, type Server as TcpServer } from 'node:net';
import { errorMessage } from '../../../common/errors.js';
import type { Logger } from '../../../common/log.js';
import { forwardQuery, parseUpstream } from './dns.forward.js';
import { type DnsEntry, DnsRecords, ptrAddress } from './dns.records.js';
import {
  buildResponse,
  CLASS_IN,
  errorResponse,
  ipv4Data,
  ipv6Data,
  parseQuery,
  type Query,
  RCODE,
  type ResourceRecord,
  readHeader,
  TYPE,
  truncateResponse,
  writeName,
} from './dns.wire.js';
import { hostUpstreams } from './host-resolvers.js';

/**
 * The engine's DNS for user-defined networks (dockerd's embedded 127.0.0.11, here on an address of
 * the network's bridge). One responder per network, UDP and TCP on the same address and port (53,
 * the network's gateway address): the socket a query arrives on tells the network. It answers
 * A/AAAA for the names of that network's endpoints (and `<name>.<network>`), PTR for their
 * addresses, and forwards every other query to the asking container's Dns servers or the host's.
 * It knows no container model: the network layer gives it plain entries (DnsRecords).
 */

export interface EmbeddedDnsOptions {
  log: Logger;
  /** The servers queries are forwarded to when the asking endpoint names none (default: the host's). */
  upstreams?: () => Promise<string[]> | string[];
  /** How long one upstream server gets to answer (dockerd: 4 s). */
  timeoutMs?: number;
  /** Forwarded queries in flight at once; more are answered SERVFAIL (dockerd: 100). */
  maxInFlight?: number;
}

export interface ServeOptions {
  /** The address to answer on: the network's gateway address (on its bridge). */
  address: string;
  /** 53 unless given (0: any free port, for tests). */
  port?: number;
  /** The network's name: `<container>.<name>` resolves as `<container>`, and names PTR answers. */
  domain?: string;
  /** The network's address blocks: clients from elsewhere see none of its names. */
  subnets?: string[];
  /**
   * Forward what the network's names do not answer (default true). False for an Internal network:
   * it has no way out, not even through its DNS (such queries get SERVFAIL).
   */
  forward?: boolean;
}

export interface Listening {
  address: string;
  port: number;
}

/** What dockerd's resolver puts in its answers (respTTL). */
export const ANSWER_TTL = 600;

const TCP_IDLE_MS = 10_000;
const TCP_MAX_CONNECTIONS = 256;
const UPSTREAM_CACHE_MS = 5_000;

interface Responder {
  udp: UdpSocket;
  tcp: TcpServer;
  connections: Set<Socket>;
  listening: Listening;
}

export class EmbeddedDns {
  readonly records = new DnsRecords();
  private readonly responders = new Map<string, Responder>();
  /** Networks whose unknown names are not forwarded (Internal). */
  private readonly closed = new Set<string>();
  private readonly queue = new Map<string, Promise<void>>();
  private readonly log: Logger;
  private inFlight = 0;
  private hostServers?: { at: number; servers: Promise<string[]> };

  constructor(private readonly o: EmbeddedDnsOptions) {
    this.log = o.log.child('dns');
  }

  /**
   * Answer on `address`:`port` for `networkId` (UDP and TCP). Rejects when the address cannot be
   * bound (not on this host, or taken). Serving a network again moves it to the new address.
   */
  serve(networkId: string, opts: ServeOptions): Promise<Listening> {
    return this.serial(networkId, () => this.serveNow(networkId, opts));
  }

  private async serveNow(networkId: string, opts: ServeOptions): Promise<Listening> {
    this.records.describe(networkId, { domain: opts.domain ?? '', subnets: opts.subnets ?? [] });
    if (opts.forward === false) this.closed.add(networkId);
    else this.closed.delete(networkId);
    const current = this.responders.get(networkId);
    if (
      current &&
      current.listening.address === opts.address &&
      (opts.port === 0 || (opts.port ?? 53) === current.listening.port)
    ) {
      return current.listening;
    }
    if (current) await this.closeResponder(networkId);
    const responder = await this.bind(networkId, opts.address, opts.port ?? 53);
    this.responders.set(networkId, responder);
    this.log.debug('answering DNS', { network: networkId, ...responder.listening });
    return responder.listening;
  }

  /** Stop answering for the network and forget its names. */
  stop(networkId: string): Promise<void> {
    return this.serial(networkId, async () => {
      await this.closeResponder(networkId);
      this.records.drop(networkId);
      this.closed.delete(networkId);
    });
  }

  /** serve and stop of one network, one after the other (a bind never races a close). */
  private serial<T>(networkId: string, work: () => Promise<T>): Promise<T> {
    const before = this.queue.get(networkId) ?? Promise.resolve();
    const run = before.then(work, work);
    const settled = run.then(
      () => undefined,
      () => undefined,
    );
    this.queue.set(networkId, settled);
    void settled.then(() => {
      if (this.queue.get(networkId) === settled) this.queue.delete(networkId);
    });
    return run;
  }

  /** Every endpoint of the network at once. */
  setRecords(networkId: string, entries: DnsEntry[]): void {
    this.records.set(networkId, entries);
  }

  /** One endpoint joining (or changing), under a key of the caller's (the endpoint ID). */
  addEndpoint(networkId: string, key: string, entry: DnsEntry): void {
    this.records.add(networkId, key, entry);
  }

  removeEndpoint(networkId: string, key: string): void {
    this.records.remove(networkId, key);
  }

  listening(networkId: string): Listening | undefined {
    return this.responders.get(networkId)?.listening;
  }

  /** Stop every responder (engine shutdown). */
  async close(): Promise<void> {
    await Promise.all([...this.responders.keys()].map((id) => this.stop(id)));
  }

  /**
   * The answer to one message from `client` that reached `networkId`'s responder; undefined when
   * nothing is to be sent back (not a query). Never throws.
   */
  async answer(networkId: string, msg: Buffer, client: string, tcp: boolean): Promise<Buffer | undefined> {
    let q: Query;
    try {
      if (msg.length < 12 || readHeader(msg).response) return undefined;
      q = parseQuery(msg);
    } catch {
      return errorResponse(msg, RCODE.FORMERR);
    }
    try {
      const limit = tcp ? 0xffff : q.udpLimit;
      if (q.header.opcode !== 0) return buildResponse(q, { rcode: RCODE.NOTIMP, limit });
      const local = this.local(networkId, q, client, limit);
      if (local) return local;
      if (this.singleLabelKept(networkId, q, client))
        return buildResponse(q, { rcode: RCODE.NOERROR, limit });
      const reply = await this.forward(networkId, msg, client, tcp);
      if (!reply) return buildResponse(q, { rcode: RCODE.SERVFAIL, limit });
      return tcp ? reply : truncateResponse(reply, q.udpLimit);
    } catch (err) {
      this.log.debug('cannot answer a DNS query', { network: networkId, error: errorMessage(err) });
      return errorResponse(msg, RCODE.SERVFAIL);
    }
  }

  /** The answer from the network's own names, or undefined to forward the query. */
  private local(networkId: string, q: Query, client: string, limit: number): Buffer | undefined {
    const { name, type } = q.question;
    if (q.question.class !== CLASS_IN) return undefined;
    const scope = this.records.scope(networkId, client);
    if (!scope.length) return undefined;
    const ptr = type === TYPE.PTR ? ptrAddress(name) : undefined;
    if (ptr) {
      const target = this.records.reverse(scope, ptr);
      if (target) {
        const data = writeName(target);
        const answers = [{ name, type: TYPE.PTR, class: CLASS_IN, ttl: ANSWER_TTL, data }];
        return buildResponse(q, { rcode: RCODE.NOERROR, answers, limit });
      }
      // an address of the network nobody holds: nobody else can know it
      if (this.records.ours(scope, ptr)) {
        return buildResponse(q, { rcode: RCODE.NXDOMAIN, authoritative: true, limit });
      }
      return undefined;
    }
    const family = type === TYPE.AAAA ? 6 : 4;
    const found = this.records.lookup(scope, name, family, this.records.client(networkId, client)?.sandbox);
    if (!found.found) return undefined;
    // a name of ours: its addresses for A/AAAA (shuffled, as dockerd does for several), no data
    // for the other family and for other types (never sent out to the world's servers)
    const answers: ResourceRecord[] =
      type === TYPE.A || type === TYPE.AAAA
        ? shuffle(found.addresses).map((ip) => ({
            name,
            type,
            class: CLASS_IN,
            ttl: ANSWER_TTL,
            data: family === 4 ? ipv4Data(ip) : ipv6Data(ip),
          }))
        : [];
    return buildResponse(q, { rcode: RCODE.NOERROR, answers, limit });
  }

  /** dockerd: with ndots set by the container, single-label A/AAAA names are not sent out. */
  private singleLabelKept(networkId: string, q: Query, client: string): boolean {
    const { name, type } = q.question;
    if (type !== TYPE.A && type !== TYPE.AAAA) return false;
    if (name.replace(/\.$/, '').includes('.')) return false;
    return this.records.client(networkId, client)?.ndotsSet === true;
  }

  private async forward(
    networkId: string,
    msg: Buffer,
    client: string,
    tcp: boolean,
  ): Promise<Buffer | undefined> {
    if (this.closed.has(networkId)) return undefined;
    const me = this.records.client(networkId, client);
    const listed = me?.upstreams?.length ? me.upstreams : await this.defaultUpstreams();
    // never itself (a host whose resolv.conf names a network's gateway): that would loop
    const servers = listed.filter((s) => !this.isOwnAddress(s));
    if (!servers.length) return undefined;
    if (this.inFlight >= (this.o.maxInFlight ?? 100)) {
      this.log.debug('too many DNS queries forwarded at once; answering SERVFAIL', { network: networkId });
      return undefined;
    }
    this.inFlight++;
    try {
      return await forwardQuery(msg, servers, { tcp, timeoutMs: this.o.timeoutMs ?? 4_000 });
    } finally {
      this.inFlight--;
    }
  }

  private isOwnAddress(server: string): boolean {
    const up = parseUpstream(server);
    if (!up) return false;
    for (const r of this.responders.values()) {
      if (r.listening.address === up.host && r.listening.port === up.port) return true;
    }
    return false;
  }

  /** The host's servers, read again at most every few seconds (resolv.conf may change). */
  private defaultUpstreams(): Promise<string[]> {
    const now = Date.now();
    if (!this.hostServers || now - this.hostServers.at > UPSTREAM_CACHE_MS) {
      const servers = Promise.resolve(this.o.upstreams ? this.o.upstreams() : hostUpstreams()).catch(
        () => [],
      );
      this.hostServers = { at: now, servers };
    }
    return this.hostServers.servers;
  }

  private async bind(networkId: string, address: string, port: number): Promise<Responder> {
    // TCP first: its bind is exclusive (another responder on the address fails here); then UDP on
    // the same port (port 0: the one TCP got; tried again when UDP finds it taken)
    for (let attempt = 0; ; attempt++) {
      const tcp = createTcpServer();
      const connections = new Set<Socket>();
      tcp.maxConnections = TCP_MAX_CONNECTIONS;
      tcp.on('connection', (sock) => this.onTcp(networkId, sock, connections));
      tcp.on('error', (err) =>
        this.log.warn('DNS TCP listener error', { network: networkId, error: errorMessage(err) }),
      );
      await new Promise<void>((resolve, reject) => {
        tcp.once('error', reject);
        tcp.listen({ host: address, port, exclusive: true }, () => {
          tcp.off('error', reject);
          resolve();
        });
      });
      const bound = tcp.address();
      const tcpPort = typeof bound === 'object' && bound ? bound.port : port;
      const udp = createSocket({ type: isIP(address) === 6 ? 'udp6' : 'udp4', reuseAddr: true });
      try {
        await new Promise<void>((resolve, reject) => {
          udp.once('error', reject);
          udp.bind({ address, port: tcpPort, exclusive: true }, () => {
            udp.off('error', reject);
            resolve();
          });
        });
      } catch (err) {
        tcp.close();
        udp.close();
        if (port === 0 && attempt < 5) continue;
        throw err;
      }
      udp.on('error', (err) =>
        this.log.warn('DNS UDP socket error', { network: networkId, error: errorMessage(err) }),
      );
      udp.on('message', (msg, rinfo) => {
        void this.answer(networkId, msg, rinfo.address, false).then((reply) => {
          if (!reply) return;
          try {
            udp.send(reply, rinfo.port, rinfo.address, (err) => {
              if (err) this.log.debug('cannot send a DNS answer', { error: errorMessage(err) });
            });
          } catch {
            // the responder was stopped while the answer was being made
          }
        });
      });
      return { udp, tcp, connections, listening: { address, port: tcpPort } };
    }
  }

  /** A TCP client: length-prefixed messages, answered as they come, closed when idle. */
  private onTcp(networkId: string, sock: Socket, connections: Set<Socket>): void {
    connections.add(sock);
    const client = sock.remoteAddress ?? '';
    let buf: Buffer = Buffer.alloc(0);
    sock.setTimeout(TCP_IDLE_MS, () => sock.destroy());
    sock.on('error', () => sock.destroy());
    sock.on('close', () => connections.delete(sock));
    sock.on('data', (chunk: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      while (buf.length >= 2) {
        const size = buf.readUInt16BE(0);
        if (buf.length < 2 + size) break;
        const msg = Buffer.from(buf.subarray(2, 2 + size));
        buf = buf.subarray(2 + size);
        void this.answer(networkId, msg, client, true).then((reply) => {
          if (!reply || sock.destroyed) return;
          const len = Buffer.alloc(2);
          len.writeUInt16BE(Math.min(reply.length, 0xffff), 0);
          sock.write(Buffer.concat([len, reply.subarray(0, 0xffff)]));
        });
      }
    });
  }

  private async closeResponder(networkId: string): Promise<void> {
    const r = this.responders.get(networkId);
    if (!r) return;
    this.responders.delete(networkId);
    for (const sock of r.connections) sock.destroy();
    await Promise.all([
      new Promise<void>((resolve) => r.tcp.close(() => resolve())),
      new Promise<void>((resolve) => {
        try {
          r.udp.close(() => resolve());
        } catch {
          resolve();
        }
      }),
    ]);
  }
}

function shuffle<T>(items: T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}
