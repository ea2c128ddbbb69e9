import type { ConnectionLimits } from '../common/connection-limits.js';
import { invalidParameter } from '../common/errors.js';
import type { LogLevel } from '../common/log.js';

export interface EngineConfig {
  /** Listen addresses: `unix:///run/berth/berth.sock`, `tcp://127.0.0.1:2375`. */
  hosts: string[];
  /** TLS of the tcp:// hosts (`--tls`, `--tlsverify`); absent: plain HTTP. Never on unix sockets. */
  tls?: EngineTls;
  /**
   * `--insecure-tcp-without-tls`: the operator's confirmation that a tcp:// host without TLS on
   * an address other than loopback is meant (refused to start without it).
   */
  insecureTcpWithoutTls: boolean;
  /**
   * `--group`/`-G`: the group of the unix sockets (mode 0660), a name or a gid; `docker` by
   * default, as dockerd (a missing `docker` group is a warning, any other missing group an
   * error); empty: the engine's own group.
   */
  socketGroup: string;
  /** Connection caps of every listener (header size, timeouts, connections per client). */
  limits: ConnectionLimits;
  dataRoot: string;
  execRoot: string;
  /** The default OCI runtime; `auto`: crun where it runs on this host, else runc (resolved at start). */
  runtime: 'runc' | 'crun' | 'auto';
  logLevel: LogLevel;
  /** Registries reached over plain HTTP (host:port or CIDR); loopback is always insecure. */
  insecureRegistries: string[];
  /** `--registry-mirror`: registries (URLs) asked first for `docker.io` images; there is no Hub here. */
  registryMirrors: string[];
  /**
   * `--registry-certs-dir`: where per-registry TLS material is looked up (`<dir>/<host:port>/`
   * ca.crt, client *.cert + *.key), in order (default /etc/docker/certs.d, /etc/berth/certs.d).
   */
  registryCertsDirs: string[];
  /** `--max-concurrent-downloads`: layers one pull fetches at once (dockerd: 3). */
  maxConcurrentDownloads: number;
  /** `--max-concurrent-uploads`: layers one push sends at once (dockerd: 5). */
  maxConcurrentUploads: number;
  experimental: boolean;
  /**
   * The default bridge's Linux name (`--bridge`/`-b`, default `berth0`); `none`: no default bridge
   * (containers in the default network mode get loopback only).
   */
  bridge: string;
  /** `--bip`: the default bridge's address and prefix length (else a free default pool). */
  bip?: string;
  /** `--host-gateway-ip`: what `host-gateway` in ExtraHosts stands for (else the default bridge's address). */
  hostGatewayIp?: string;
  /** `--copy-upload-limit`: the largest archive docker cp may upload, in bytes (413 beyond). */
  copyUploadLimit: number;
  /** `--swarm-etcd-binary`: the etcd a swarm manager runs its member with. */
  swarmEtcdBinary: string;
  /** `--swarm-etcd-peer-port`: the port a manager's etcd member takes peers on (advertise address). */
  swarmEtcdPeerPort: number;
  /** `--swarm-gateway-bridge`: the bridge of overlay tasks' egress (dockerd's `docker_gwbridge`). */
  swarmGatewayBridge: string;
  /** `--swarm-ingress-link`: the host's end of the link to the ingress sandbox, and its nft table. */
  swarmIngressLink: string;
}

/** The TLS of the tcp:// listeners: PEM files, and whether clients must show a certificate. */
export interface EngineTls {
  /** `--tlsverify`: only clients with a certificate signed by `caFile` are served. */
  verify: boolean;
  /** `--tlscacert`: the CA client certificates must be signed by (required with verify). */
  caFile?: string;
  /** `--tlscert`, `--tlskey`: the server's certificate and key. */
  certFile: string;
  keyFile: string;
}

/** The connection caps by default: dockerd's (Go's) 1 MiB of headers, minutes-long timeouts. */
export const defaultEngineLimits: ConnectionLimits = {
  maxHeaderBytes: 1024 * 1024,
  maxConnectionsPerClient: 256,
  maxLocalConnections: 2048,
  headersTimeoutMs: 60_000,
  bodyIdleTimeoutMs: 120_000,
  keepAliveTimeoutMs: 65_000,
};

export const defaultEngineConfig: EngineConfig = {
  hosts: ['unix:///run/berth/berth.sock'],
  insecureTcpWithoutTls: false,
  socketGroup: 'docker',
  limits: defaultEngineLimits,
  dataRoot: '/var/lib/berth',
  execRoot: '/run/berth',
  runtime: 'auto',
  logLevel: 'info',
  insecureRegistries: ['127.0.0.0/8'],
  registryMirrors: [],
  registryCertsDirs: ['/etc/docker/certs.d', '/etc/berth/certs.d'],
  maxConcurrentDownloads: 3,
  maxConcurrentUploads: 5,
  experimental: false,
  bridge: 'berth0',
  copyUploadLimit: 10 * 1024 ** 3,
  swarmEtcdBinary: '/usr/bin/etcd',
  swarmEtcdPeerPort: 2380,
  swarmGatewayBridge: 'docker_gwbridge',
  swarmIngressLink: 'berth-ingress',
};

export function parseRuntimeName(value: string): 'runc' | 'crun' {
  if (value === 'runc' || value === 'crun') return value;
  throw invalidParameter(`unknown runtime ${JSON.stringify(value)}: use runc or crun`);
}
