import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { existsSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { PortProto } from '../ports/port-spec.js';

/** Where a published port leads: the container's address and port. */
export interface PortTarget {
  ip: string;
  port: number;
}

/** A bound host port; close() lets it go. */
export interface PortHolder {
  close(): Promise<void>;
}

/**
 * Binds the host ports a container publishes, as dockerd's docker-proxy does: the port is the
 * engine's while it is published (nobody else can take it, and a taken port is found at start),
 * and whatever reaches the socket is relayed to the container. The kernel's DNAT rules take the
 * IPv4 traffic before it gets there, so the relay carries only what they cannot: a host's IPv6
 * address to a container's IPv4 one. Unit tests substitute a fake.
 */
export interface PortSocketOps {
  /** Bind `hostIp:hostPort`; rejects with the errno error (EADDRINUSE, EADDRNOTAVAIL, ...). */
  bind(proto: PortProto, hostIp: string, hostPort: number, target: PortTarget): Promise<PortHolder>;
}

/** How long a UDP client's relay socket lives without traffic (docker-proxy's 90 s). */
const UDP_IDLE_MS = 90_000;

function listenTcp(hostIp: string, hostPort: number, target: PortTarget): Promise<PortHolder> {
  const open = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect({ host: target.ip, port: target.port });
    open.add(client);
    open.add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    client.pipe(upstream).pipe(client);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: hostIp, port: hostPort, ipv6Only: hostIp.includes(':'), exclusive: true }, () => {
      server.off('error', reject);
      server.on('error', () => undefined);
      resolve({
        close: () =>
          new Promise<void>((done) => {
            for (const s of open) s.destroy();
            server.close(() => done());
          }),
      });
    });
  });
}

function listenUdp(hostIp: string, hostPort: number, target: PortTarget): Promise<PortHolder> {
  const v6 = hostIp.includes(':');
  const socket: UdpSocket = createSocket({ type: v6 ? 'udp6' : 'udp4', ipv6Only: v6 });
  const clients = new Map<string, { relay: UdpSocket; timer: NodeJS.Timeout }>();
  const drop = (key: string) => {
    const c = clients.get(key);
    if (!c) return;
    clearTimeout(c.timer);
    c.relay.close();
    clients.delete(key);
  };
  socket.on('message', (msg, from) => {
    const key = `${from.address}/${from.port}`;
    let c = clients.get(key);
    if (!c) {
      const relay = createSocket('udp4');
      relay.on('message', (back) => socket.send(back, from.port, from.address));
      relay.on('error', () => drop(key));
      c = { relay, timer: setTimeout(() => drop(key), UDP_IDLE_MS) };
      c.timer.unref();
      clients.set(key, c);
    }
    c.timer.refresh();
    c.relay.send(msg, target.port, target.ip);
  });
  return new Promise((resolve, reject) => {
    socket.once('error', reject);
    socket.bind({ address: hostIp, port: hostPort, exclusive: true }, () => {
      socket.off('error', reject);
      socket.on('error', () => undefined);
      resolve({
        close: () =>
          new Promise<void>((done) => {
            for (const key of [...clients.keys()]) drop(key);
            socket.close(() => done());
          }),
      });
    });
  });
}

/**
 * SCTP: Node opens no SCTP sockets, so the port is not held by a socket of the engine's (another
 * program may still bind it) and the kernel's DNAT rules alone carry the traffic (IPv4 host
 * addresses). A kernel without SCTP (no /proc/net/sctp: the module is not loaded) refuses it with
 * EPROTONOSUPPORT, where dockerd's docker-proxy fails to listen.
 */
function sctpPort(hostIp: string, sctpProc: string): Promise<PortHolder> {
  if (!existsSync(sctpProc)) {
    const err = Object.assign(new Error('protocol not supported'), { code: 'EPROTONOSUPPORT' });
    return Promise.reject(err);
  }
  if (hostIp.includes(':')) {
    // no relay for IPv6 host addresses: left out as a host without IPv6 would leave it
    const err = Object.assign(new Error('address family not supported for SCTP'), { code: 'EAFNOSUPPORT' });
    return Promise.reject(err);
  }
  return Promise.resolve({ close: async () => undefined });
}

export class HostPortSockets implements PortSocketOps {
  constructor(private readonly sctpProc = '/proc/net/sctp') {}

  bind(proto: PortProto, hostIp: string, hostPort: number, target: PortTarget): Promise<PortHolder> {
    if (proto === 'sctp') return sctpPort(hostIp, this.sctpProc);
    return proto === 'udp' ? listenUdp(hostIp, hostPort, target) : listenTcp(hostIp, hostPort, target);
  }
}
