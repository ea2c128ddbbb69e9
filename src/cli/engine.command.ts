import { isIP } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { ConnectionLimits } from '../common/connection-limits.js';
import { errorMessage } from '../common/errors.js';
import { parseLogLevel, rootLogger } from '../common/log.js';
import {
  defaultEngineConfig,
  defaultEngineLimits,
  type EngineConfig,
  type EngineTls,
  parseRuntimeName,
} from '../engine/config.js';
import { parseRamSize } from '../engine/containers/core/units.js';
import { type ReloadableConfig, startEngine } from '../engine/daemon.js';
import {
  bool,
  type FlagSpec,
  list,
  type Parsed,
  parseArgs,
  parseDuration,
  str,
  UsageError,
  untilSignal,
  usage,
} from './args.js';
import { applyConfigFile, type ConfigFile, configFileChoice, readConfigFile } from './config-file.js';

export const engineFlags: Record<string, FlagSpec> = {
  host: {
    kind: 'list',
    short: 'H',
    help: 'listen address, unix:///path or tcp://host:port (default unix:///run/berth/berth.sock)',
  },
  ...frontDoorFlags(),
  'data-root': { kind: 'string', help: 'root of persistent state (default /var/lib/berth)' },
  'exec-root': { kind: 'string', help: 'root of runtime state (default /run/berth)' },
  runtime: {
    kind: 'string',
    help: 'default OCI runtime: runc or crun (default crun where it runs on this host, else runc)',
  },
  'log-level': { kind: 'string', help: 'debug, info, warn or error (default info)' },
  'insecure-registry': { kind: 'list', help: 'registry reached over plain HTTP (host:port or CIDR)' },
  'registry-mirror': { kind: 'list', help: 'registry mirror (URL) asked for docker.io images' },
  'registry-certs-dir': {
    kind: 'list',
    help: 'folder of per-registry certificates, <dir>/<host:port>/ (default /etc/docker/certs.d and /etc/berth/certs.d)',
  },
  'max-concurrent-downloads': { kind: 'string', help: 'layers one pull downloads at once (default 3)' },
  'max-concurrent-uploads': { kind: 'string', help: 'layers one push uploads at once (default 5)' },
  experimental: { kind: 'bool', help: 'enable experimental features' },
  bridge: {
    kind: 'string',
    short: 'b',
    help: "the default bridge's name (default berth0; created when missing); none: no default bridge",
  },
  bip: { kind: 'string', help: "the default bridge's address and prefix length, as 172.30.0.1/16" },
  'host-gateway-ip': {
    kind: 'string',
    help: "what host-gateway in --add-host stands for (default: the default bridge's address)",
  },
  'copy-upload-limit': {
    kind: 'string',
    help: 'the largest archive docker cp may upload, as 512m or 2g (default 10g; 413 beyond it)',
  },
  'swarm-etcd-binary': {
    kind: 'string',
    help: "the etcd a swarm manager runs its cluster store's member with (default /usr/bin/etcd)",
  },
  'swarm-etcd-peer-port': {
    kind: 'string',
    help: "the port a swarm manager's etcd member takes its peers on, at the advertise address (default 2380)",
  },
  'swarm-gateway-bridge': {
    kind: 'string',
    help: 'the bridge that gives overlay tasks their egress (default docker_gwbridge; engines sharing a network namespace need one each)',
  },
  'swarm-ingress-link': {
    kind: 'string',
    help: 'the link to the ingress routing mesh, and its nft table (default berth-ingress; engines sharing a network namespace need one each)',
  },
  'config-file': {
    kind: 'string',
    help: "daemon configuration file in dockerd's daemon.json form (default /etc/berth/daemon.json, read when present)",
  },
  help: { kind: 'bool', help: 'print this help' },
};

/** The flags of the listeners: TLS, the socket's group, the connection caps. */
function frontDoorFlags(): Record<string, FlagSpec> {
  const certDir = '$DOCKER_CERT_PATH or ~/.docker';
  return {
    tls: { kind: 'bool', help: 'serve tcp:// hosts over TLS; implied by --tlsverify' },
    tlsverify: {
      kind: 'bool',
      help: 'serve tcp:// hosts over TLS and only to clients with a certificate signed by --tlscacert',
    },
    tlscacert: {
      kind: 'string',
      help: `trust client certificates signed only by this CA (default ${certDir}/ca.pem)`,
    },
    tlscert: { kind: 'string', help: `the server's TLS certificate (default ${certDir}/cert.pem)` },
    tlskey: { kind: 'string', help: `the server's TLS key (default ${certDir}/key.pem)` },
    'insecure-tcp-without-tls': {
      kind: 'bool',
      help: 'allow a tcp:// host without TLS on an address other than loopback: anyone who reaches it is root on this host',
    },
    group: {
      kind: 'string',
      short: 'G',
      help: 'group of the unix socket (mode 0660), a name or a gid (default docker when it exists)',
    },
    'max-header-size': {
      kind: 'string',
      help: 'largest request line and headers of one request, as 64k or 1m (default 1m; 431 past it)',
    },
    'max-connections-per-client': {
      kind: 'string',
      help: 'most open connections from one address on a tcp:// host (default 256; 429 past it; 0: no cap)',
    },
    'max-local-connections': {
      kind: 'string',
      help: 'most open connections on a unix socket, all clients together (default 2048; 429 past it; 0: no cap)',
    },
    'headers-timeout': {
      kind: 'string',
      help: "time a client has to send a request's headers, as 60s or 500ms (default 60s; 408 past it)",
    },
    'body-idle-timeout': {
      kind: 'string',
      help: 'a request body that receives nothing for this long is cut (default 2m; 408; streams are not affected)',
    },
    'keep-alive-timeout': {
      kind: 'string',
      help: 'an idle keep-alive connection is closed after this long (default 65s)',
    },
  };
}

/** The directory of the default TLS files: $DOCKER_CERT_PATH, else $DOCKER_CONFIG or ~/.docker (dockerd's). */
function certDirectory(env: NodeJS.ProcessEnv): string {
  return env.DOCKER_CERT_PATH || env.DOCKER_CONFIG || join(homedir(), '.docker');
}

/**
 * TLS as dockerd 20.10 reads its flags: `--tlsverify` (given at all, or DOCKER_TLS_VERIFY set)
 * turns TLS on; `--tls` alone serves TLS without asking clients for a certificate.
 */
export function engineTlsFrom(p: Parsed, env: NodeJS.ProcessEnv = process.env): EngineTls | undefined {
  const verifyGiven = p.flags.has('tlsverify');
  const verify = verifyGiven ? bool(p, 'tlsverify') : Boolean(env.DOCKER_TLS_VERIFY);
  if (!bool(p, 'tls') && !verifyGiven && !verify) {
    for (const name of ['tlscacert', 'tlscert', 'tlskey']) {
      if (p.flags.has(name)) throw new UsageError(`--${name} needs --tls or --tlsverify`);
    }
    return undefined;
  }
  const dir = certDirectory(env);
  const caFile = str(p, 'tlscacert') ?? join(dir, 'ca.pem');
  return {
    verify,
    ...(verify || p.flags.has('tlscacert') ? { caFile } : {}),
    certFile: str(p, 'tlscert') ?? join(dir, 'cert.pem'),
    keyFile: str(p, 'tlskey') ?? join(dir, 'key.pem'),
  };
}

/** `--host-gateway-ip`: an IPv4 or IPv6 address, as dockerd's flag takes. */
function hostGatewayIp(p: Parsed): { hostGatewayIp?: string } {
  const text = str(p, 'host-gateway-ip');
  if (text === undefined) return {};
  if (!isIP(text)) throw new UsageError(`--host-gateway-ip takes an IP address: ${text}`);
  return { hostGatewayIp: text };
}

function count(p: Parsed, name: string, fallback: number): number {
  const text = str(p, name);
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text)) throw new UsageError(`--${name} takes a whole number: ${text}`);
  return Number(text);
}

function port(p: Parsed, name: string, fallback: number): number {
  const value = count(p, name, fallback);
  if (value < 1 || value > 65535) throw new UsageError(`--${name} takes a port from 1 to 65535: ${value}`);
  return value;
}

function duration(p: Parsed, name: string, fallback: number): number {
  const text = str(p, name);
  return text === undefined ? fallback : parseDuration(text);
}

/** A size flag (`64k`, `1m`, `10g`), at least `min` bytes (`minText` in the message). */
function size(p: Parsed, name: string, fallback: number, min: number, minText: string): number {
  const text = str(p, name);
  if (text === undefined) return fallback;
  let bytes: number;
  try {
    bytes = parseRamSize(text, `--${name}`);
  } catch (err) {
    throw new UsageError(errorMessage(err));
  }
  if (bytes < min) throw new UsageError(`--${name} must be at least ${minText}: ${text}`);
  return bytes;
}

export function engineLimitsFrom(p: Parsed): ConnectionLimits {
  const d = defaultEngineLimits;
  return {
    maxHeaderBytes: size(p, 'max-header-size', d.maxHeaderBytes, 1024, '1k'),
    maxConnectionsPerClient: count(p, 'max-connections-per-client', d.maxConnectionsPerClient),
    maxLocalConnections: count(p, 'max-local-connections', d.maxLocalConnections),
    headersTimeoutMs: duration(p, 'headers-timeout', d.headersTimeoutMs),
    bodyIdleTimeoutMs: duration(p, 'body-idle-timeout', d.bodyIdleTimeoutMs),
    keepAliveTimeoutMs: duration(p, 'keep-alive-timeout', d.keepAliveTimeoutMs),
  };
}

/** A registry mirror as dockerd's ValidateMirror takes it (the URL kept as given). */
function checkMirror(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError(`invalid mirror: ${JSON.stringify(value)} is not a valid URI`);
  }
  const scheme = url.protocol.replace(/:$/, '');
  if (scheme !== 'http' && scheme !== 'https') {
    throw new UsageError(
      `invalid mirror: unsupported scheme ${JSON.stringify(scheme)} in ${JSON.stringify(value)}`,
    );
  }
  if ((url.pathname !== '' && url.pathname !== '/') || url.search !== '' || url.hash !== '') {
    throw new UsageError(
      `invalid mirror: path, query, or fragment at end of the URI ${JSON.stringify(value)}`,
    );
  }
  if (url.username || url.password) {
    throw new UsageError(`invalid mirror: username/password not allowed in URI ${JSON.stringify(value)}`);
  }
  return value;
}

/**
 * An insecure registry (host[:port] or CIDR) as dockerd 20.10's LoadInsecureRegistries takes it:
 * an `http://` or `https://` in front is dropped (with a warning), any other scheme refused.
 */
function checkInsecureRegistry(value: string): string {
  const scheme = /^(https?):\/\//i.exec(value);
  if (scheme) {
    rootLogger.warn(
      `insecure registry ${value} should not contain '${scheme[1]}://' and '${scheme[1]}://' has been removed from the insecure registry config`,
    );
    return checkInsecureRegistry(value.slice(scheme[0].length));
  }
  if (value.includes('://')) throw new UsageError(`insecure registry ${value} should not contain '://'`);
  if (value === '' || value.startsWith('-') || value.endsWith('-')) {
    throw new UsageError(`invalid index name (${value})`);
  }
  return value;
}

export function engineConfigFrom(p: Parsed): EngineConfig {
  const logLevel = str(p, 'log-level');
  const runtime = str(p, 'runtime');
  const tls = engineTlsFrom(p);
  return {
    hosts: list(p, 'host') ?? defaultEngineConfig.hosts,
    ...(tls ? { tls } : {}),
    insecureTcpWithoutTls: bool(p, 'insecure-tcp-without-tls'),
    socketGroup: str(p, 'group') ?? defaultEngineConfig.socketGroup,
    limits: engineLimitsFrom(p),
    dataRoot: str(p, 'data-root') ?? defaultEngineConfig.dataRoot,
    execRoot: str(p, 'exec-root') ?? defaultEngineConfig.execRoot,
    runtime: runtime ? parseRuntimeName(runtime) : defaultEngineConfig.runtime,
    logLevel: logLevel ? parseLogLevel(logLevel) : defaultEngineConfig.logLevel,
    insecureRegistries: [
      ...defaultEngineConfig.insecureRegistries,
      ...(list(p, 'insecure-registry') ?? []).map(checkInsecureRegistry),
    ],
    registryMirrors: (list(p, 'registry-mirror') ?? defaultEngineConfig.registryMirrors).map(checkMirror),
    registryCertsDirs: list(p, 'registry-certs-dir') ?? defaultEngineConfig.registryCertsDirs,
    maxConcurrentDownloads: count(p, 'max-concurrent-downloads', defaultEngineConfig.maxConcurrentDownloads),
    maxConcurrentUploads: count(p, 'max-concurrent-uploads', defaultEngineConfig.maxConcurrentUploads),
    experimental: bool(p, 'experimental'),
    bridge: str(p, 'bridge') ?? defaultEngineConfig.bridge,
    ...(str(p, 'bip') ? { bip: str(p, 'bip') } : {}),
    ...hostGatewayIp(p),
    copyUploadLimit: size(p, 'copy-upload-limit', defaultEngineConfig.copyUploadLimit, 1, '1 byte'),
    swarmEtcdBinary: str(p, 'swarm-etcd-binary') ?? defaultEngineConfig.swarmEtcdBinary,
    swarmEtcdPeerPort: port(p, 'swarm-etcd-peer-port', defaultEngineConfig.swarmEtcdPeerPort),
    swarmGatewayBridge: linkName(p, 'swarm-gateway-bridge', defaultEngineConfig.swarmGatewayBridge),
    swarmIngressLink: linkName(p, 'swarm-ingress-link', defaultEngineConfig.swarmIngressLink),
  };
}

/** A network interface's name, as the kernel takes it (1 to 15 characters, no slash or space). */
function linkName(p: Parsed, name: string, fallback: string): string {
  const value = str(p, name) ?? fallback;
  if (!/^[A-Za-z0-9_.-]{1,15}$/.test(value))
    throw new UsageError(
      `--${name} takes an interface name of 1 to 15 letters, digits, '_', '.' or '-': ${value}`,
    );
  return value;
}

/** The flags with the configuration file's values (--config-file, else the default file when present). */
export async function flagsWithConfigFile(p: Parsed): Promise<{ flags: Parsed; file?: ConfigFile }> {
  const choice = configFileChoice(p);
  const file = await readConfigFile(choice.path, choice.explicit, engineFlags);
  return { flags: applyConfigFile(p, file), ...(file ? { file } : {}) };
}

/** The engine's configuration from its flags and its configuration file. */
export async function loadEngineConfig(p: Parsed): Promise<EngineConfig> {
  return engineConfigFrom((await flagsWithConfigFile(p)).flags);
}

/** What a reload (SIGHUP) changes, by the flag it comes from: what dockerd reloads that berth has. */
const RELOADABLE: Array<[flag: string, field: keyof ReloadableConfig]> = [
  ['log-level', 'logLevel'],
  ['insecure-registry', 'insecureRegistries'],
  ['registry-mirror', 'registryMirrors'],
  ['max-concurrent-downloads', 'maxConcurrentDownloads'],
  ['max-concurrent-uploads', 'maxConcurrentUploads'],
];

/**
 * dockerd's reload: the configuration file read again (with the same flags and the same
 * conflict rules); the reloadable options it sets replace the running ones, the others stay.
 */
export async function reloadedConfig(p: Parsed): Promise<Partial<ReloadableConfig>> {
  const { flags, file } = await flagsWithConfigFile(p);
  const next = engineConfigFrom(flags);
  const parts: Partial<ReloadableConfig> = {};
  for (const [flag, field] of RELOADABLE) {
    if (file?.values.has(flag)) Object.assign(parts, { [field]: next[field] });
  }
  // dockerd's `debug` reloads too: on, the debug level; off, the level flags and file give
  if (file?.debug !== undefined) parts.logLevel = next.logLevel;
  return parts;
}

export async function runEngineCommand(argv: string[]): Promise<number> {
  const parsed = parseArgs(argv, engineFlags);
  if (bool(parsed, 'help')) {
    process.stdout.write(`${usage('engine', engineFlags)}\n`);
    return 0;
  }
  const config = await loadEngineConfig(parsed);
  rootLogger.setLevel(config.logLevel);
  const engine = await startEngine(config, rootLogger.child('engine'));
  const stopReloads = onReloadSignal(async () => {
    const parts = await reloadedConfig(parsed);
    if (parts.logLevel) rootLogger.setLevel(parts.logLevel);
    engine.reload(parts);
  });
  const sig = await untilSignal();
  stopReloads();
  rootLogger.info('shutting down', { signal: sig });
  await engine.close();
  return 0;
}

/**
 * SIGHUP runs `reload` (one at a time); a failed reload is logged and changes nothing, as
 * dockerd's. Returns the function that stops listening.
 */
export function onReloadSignal(reload: () => Promise<void>): () => void {
  let running = Promise.resolve();
  const on = () => {
    running = running.then(async () => {
      rootLogger.info('got SIGHUP: reloading the configuration');
      try {
        await reload();
      } catch (err) {
        rootLogger.error('reloading the configuration failed', { error: errorMessage(err) });
      }
    });
  };
  process.on('SIGHUP', on);
  return () => process.off('SIGHUP', on);
}
