import { lookup } from 'node:dns/promises';
import { chmod, chown, mkdir, readFile, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { ServerOptions as TlsServerOptions } from 'node:https';
import { isIP } from 'node:net';
import { dirname } from 'node:path';
import { createSecureContext } from 'node:tls';
import { errorMessage } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { type ListenAddress, parseListenAddress } from '../../http/server.js';
import type { EngineConfig, EngineTls } from '../config.js';

/**
 * The engine's front door: which addresses it listens on, over TLS or not, who may open its unix
 * sockets, and what `docker info` warns about them. Checked before the engine starts anything
 * (`prepareFrontDoor`), opened once it is ready (`listenOn`).
 */
export interface FrontDoor {
  addresses: ListenAddress[];
  /** HTTPS options for the tcp:// listeners (absent: plain HTTP). */
  tls?: TlsServerOptions;
  /** The gid the unix sockets get (absent: the engine's own group). */
  socketGid?: number;
}

/** dockerd's text after each API warning of `docker info` (daemon/info.go). */
const ATTACK_SURFACE = `
         Access to the remote API is equivalent to root access on the host. Refer
         to the 'Docker daemon attack surface' section in the documentation for
         more information: https://docs.docker.com/go/attack-surface/`;

/**
 * Read and check what the listeners need before the engine starts anything: the addresses, the
 * TLS files, the socket group, and that no tcp:// host without TLS is reachable from other
 * hosts unless the operator confirmed it (`--insecure-tcp-without-tls`).
 */
export async function prepareFrontDoor(config: EngineConfig, log: Logger): Promise<FrontDoor> {
  const tcpPort = config.tls ? 2376 : 2375;
  const addresses = config.hosts.map((h) => parseListenAddress(h, tcpPort));
  const tls = config.tls ? await loadTlsOptions(config.tls) : undefined;
  for (const addr of addresses) {
    if (addr.kind !== 'tcp' || config.tls?.verify) continue;
    const host = `tcp://${hostPort(addr)}`;
    if (!config.tls && !(await isLoopback(addr.host ?? '')) && !config.insecureTcpWithoutTls) {
      throw new Error(
        `refusing to listen on ${host} without TLS: anyone who reaches this address gets root access on this host. ` +
          'Serve it with --tlsverify (and --tlscacert, --tlscert, --tlskey), listen on a loopback address, ' +
          'or confirm with --insecure-tcp-without-tls',
      );
    }
    // dockerd's warnings (daemon/command/daemon.go loadListeners)
    log.warn(
      'Binding to IP address without --tlsverify is insecure and gives root access on this machine to everyone who has access to your network.',
      { host },
    );
    log.warn(
      'Binding to an IP address, even on localhost, can also give access to scripts run in a browser. Be safe out there!',
      { host },
    );
  }
  const hasUnix = addresses.some((a) => a.kind === 'unix');
  const socketGid = hasUnix ? await resolveSocketGroup(config.socketGroup, log) : undefined;
  return { addresses, ...(tls ? { tls } : {}), ...(socketGid !== undefined ? { socketGid } : {}) };
}

/** The HTTPS options of `--tls`/`--tlsverify`: the files read, the pair checked. */
export async function loadTlsOptions(tls: EngineTls): Promise<TlsServerOptions> {
  const read = async (file: string, what: string): Promise<Buffer> => {
    try {
      return await readFile(file);
    } catch (err) {
      throw new Error(`could not read the TLS ${what} ${file}: ${errorMessage(err)}`);
    }
  };
  if (tls.verify && !tls.caFile)
    throw new Error('--tlsverify needs a CA to verify clients with (--tlscacert)');
  const cert = await read(tls.certFile, 'certificate (--tlscert)');
  const key = await read(tls.keyFile, 'key (--tlskey)');
  const ca = tls.caFile ? await read(tls.caFile, 'CA certificate (--tlscacert)') : undefined;
  const options: TlsServerOptions = {
    cert,
    key,
    ...(ca ? { ca } : {}),
    minVersion: 'TLSv1.2',
    // --tlsverify: a client without a certificate signed by the CA fails the handshake
    requestCert: tls.verify,
    rejectUnauthorized: tls.verify,
  };
  try {
    createSecureContext(options);
  } catch (err) {
    throw new Error(
      `invalid TLS configuration (--tlscert ${tls.certFile}, --tlskey ${tls.keyFile}): ${errorMessage(err)}`,
    );
  }
  return options;
}

/**
 * The gid of `--group`, as dockerd: a group name, else a number; the default `docker` may be
 * missing (a warning; the socket keeps the engine's group), any other group may not.
 */
export async function resolveSocketGroup(group: string, log: Logger): Promise<number | undefined> {
  if (group === '') return undefined;
  const byName = await groupId(group);
  if (byName !== undefined) return byName;
  if (/^\d+$/.test(group)) return Number(group);
  if (group === 'docker') {
    log.warn('could not change the group of the API socket to docker: group docker not found');
    return undefined;
  }
  throw new Error(`group ${group} not found (--group)`);
}

async function groupId(name: string): Promise<number | undefined> {
  let text: string;
  try {
    text = await readFile('/etc/group', 'utf8');
  } catch {
    return undefined;
  }
  for (const line of text.split('\n')) {
    const [group, , gid] = line.split(':');
    if (group === name && gid && /^\d+$/.test(gid)) return Number(gid);
  }
  return undefined;
}

function hostPort(addr: ListenAddress, port = addr.port): string {
  const host = addr.host?.includes(':') ? `[${addr.host}]` : addr.host;
  return `${host}:${port}`;
}

function loopbackIp(ip: string): boolean {
  if (isIP(ip) === 4) return ip.startsWith('127.');
  const lower = ip.toLowerCase();
  return lower === '::1' || lower.startsWith('::ffff:127.');
}

/** Whether a host is loopback only: `localhost`, a loopback IP, a name resolving to loopback alone. */
export async function isLoopback(host: string): Promise<boolean> {
  if (host === 'localhost') return true;
  if (isIP(host)) return loopbackIp(host);
  try {
    const found = await lookup(host, { all: true });
    return found.length > 0 && found.every((a) => loopbackIp(a.address));
  } catch {
    return false;
  }
}

/**
 * Listen on one address; answers the address listened on (tcp port 0 resolved). A unix socket
 * is made with mode 0600 and only then given its group and mode 0660, so that no one outside
 * the group can connect in between.
 */
export async function listenOn(
  server: Server,
  addr: ListenAddress,
  door: FrontDoor,
  log: Logger,
): Promise<string> {
  if (addr.kind === 'unix') {
    const path = addr.path ?? '';
    await mkdir(dirname(path), { recursive: true });
    await rm(path, { force: true });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      const umask = process.umask(0o177);
      try {
        server.listen(path, () => {
          server.off('error', reject);
          resolve();
        });
      } finally {
        process.umask(umask);
      }
    });
    if (door.socketGid !== undefined) await chown(path, process.getuid?.() ?? 0, door.socketGid);
    await chmod(path, 0o660);
    log.info('API listening', { address: `unix://${path}` });
    return `unix://${path}`;
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(addr.port ?? 2375, addr.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = server.address();
  const port = typeof bound === 'object' && bound ? bound.port : addr.port;
  const address = `tcp://${hostPort(addr, port)}`;
  log.info('API listening', {
    address,
    tls: door.tls ? (door.tls.requestCert ? 'verify' : 'no client verification') : 'none',
  });
  return address;
}

/**
 * What `docker info` warns about the listeners, in dockerd's words (daemon/info.go fillAPIInfo):
 * each tcp:// address without TLS, or with TLS but no client verification.
 */
export function apiWarnings(bound: string[], tls: EngineTls | undefined): string[] {
  const warnings: string[] = [];
  for (const address of bound) {
    if (!address.startsWith('tcp://')) continue;
    const hostport = address.slice('tcp://'.length);
    if (!tls)
      warnings.push(`WARNING: API is accessible on http://${hostport} without encryption.${ATTACK_SURFACE}`);
    else if (!tls.verify)
      warnings.push(
        `WARNING: API is accessible on https://${hostport} without TLS client verification.${ATTACK_SURFACE}`,
      );
  }
  return warnings;
}
