import type { ContainerConfig, HostConfig } from '../../../common/docker-types.js';
import type { Endpoint } from '../../network/network.types.js';
import type { AttachConnection, SpecMount } from '../../runtime/runtime.types.js';
import type { Snapshotter } from '../../storage/snapshotter.types.js';
import type { Container } from './container.js';
import type { LinkRecord, MountPoint, NetworkingConfig } from './record.types.js';

/**
 * What the core's state machine (create, start, exit, remove, restore) asks of the rooms above
 * it, in the order dockerd does things. The rooms implement these (net/, mounts/, io/, exec/);
 * containers.service.ts plugs them in. The core imports no room.
 */

/** The writable snapshots of containers, with the overlay paths (rootfs mount, diff, inspect). */
export type ContainerSnapshots = Snapshotter;

/** A link of HostConfig.Links resolved at create: the target and the alias. */
export interface LinkTarget {
  alias: string;
  id: string;
  /** The target's name (with slash). */
  name: string;
}

/** What a start takes from the network: the namespace to join and the links' variables. */
export interface StartNetwork {
  /** A namespace file or `host`; undefined: a new namespace (loopback only). */
  netns?: string;
  /** The container's environment with its legacy links' variables merged in (undefined: no links). */
  env?: string[];
  /** Sysctls of the container's interface (its endpoint's com.docker.network.endpoint.sysctls). */
  sysctls?: Record<string, string>;
}

/** What a stopped container's run had: its sandbox and endpoints (to release). */
export interface DetachedNetwork {
  sandboxId: string;
  sandboxKey: string;
  endpoints: Endpoint[];
}

/** The container side of networking (net/). */
export interface NetworkPort {
  /** The engine's default network as a NetworkMode: `bridge`, or `default` without a bridge. */
  defaultNetworkMode(): string;
  /**
   * Create: the network mode, the endpoint settings (networks, static addresses, aliases) and
   * HostConfig.Links checked (400s, 404 for a missing network), the links resolved.
   */
  checkCreate(hc: HostConfig, nc?: NetworkingConfig): LinkTarget[];
  /** Create: the links a new container keeps (one per link name, names free). */
  keptLinks(name: string, links: LinkTarget[]): LinkRecord[];
  /** Create and restore: reserve the container's link names. */
  registerLinks(c: Container): void;
  /**
   * Start, before the spec: the namespace (bridge attachment begun, another container's, the
   * host's), the container's /etc/hosts, /etc/hostname and /etc/resolv.conf written (their paths
   * into the record), the links checked.
   */
  prepare(c: Container): Promise<StartNetwork>;
  /** Start: the namespace exists (the runtime may join it). */
  ready(c: Container): Promise<void>;
  /** Start, before the process runs: the endpoint recorded, `network connect` announced. */
  connect(c: Container): Promise<void>;
  /** A failed start: undo the attachment. */
  abort(c: Container): void;
  /** Exit, before the exit is saved: the endpoints leave the record. */
  detach(c: Container): DetachedNetwork | undefined;
  /** Exit, after `die`: the sandbox released, `network disconnect` announced for each network. */
  release(c: Container, detached: DetachedNetwork | undefined): void;
  /** Live restore: a running container keeps its sandbox. */
  restore(c: Container): void;
  /** Restore done: release what no running container holds. */
  sweep(): Promise<void>;
  /** The container is gone: its link names go. */
  removed(c: Container): void;
  /** The container was renamed: its link names follow it. */
  renamed(c: Container, oldName: string): void;
}

/** The container side of volumes and binds (mounts/). */
export interface MountsPort {
  /** Create: the volume mounts (volumes made and referenced); 400s for bad specs. */
  resolve(id: string, hc: HostConfig, config: ContainerConfig): Promise<MountPoint[]>;
  /** A create that failed after resolve: references dropped, its anonymous volumes removed. */
  abandon(id: string, points: MountPoint[]): Promise<void>;
  /** Start: bind sources made, volumes mounted (quietly) and filled; the runtime's mounts. */
  specMounts(c: Container, rootfs: string): Promise<SpecMount[]>;
  /** Start, after `network connect`: the `mount` events. */
  announce(c: Container): void;
  /** The process stopped (or never started): volumes unmounted (`unmount` when announced). */
  release(c: Container): Promise<void>;
  /** The container is gone: its references dropped; its anonymous volumes too when asked. */
  forget(c: Container, removeAnonymous: boolean): Promise<void>;
  /** Engine start: every container references its volumes again, running ones mounted. */
  restore(containers: Iterable<Container>): Promise<void>;
}

/** The container's stdio as the engine shares it among attached clients (io/). */
export interface StdioPort {
  /**
   * The process is about to run (or runs, after an engine restart): its attach connection, opened
   * by `connector` now when a client attached before the start and otherwise when one comes,
   * feeds the attached clients.
   */
  started(c: Container, connector: () => Promise<AttachConnection>): Promise<void>;
  /** The process ended: attached clients are told, input is dropped. */
  exited(c: Container): void;
  /** Engine shutdown: the runtime connection closed, clients kept. */
  disconnect(c: Container): void;
  /** The container is gone. */
  removed(c: Container): void;
}

/** The container's log (io/): the engine copies what the monitor captures into LogPath. */
export interface LogsPort {
  /** Where the monitor writes the output, and its size bound (none for log driver `none`). */
  monitorOptions(c: Container): { logPath?: string; logSizeMax?: number };
  start(c: Container): void;
  /** The process ended: copy what is left (its log is complete once this resolves). */
  finish(c: Container): Promise<void>;
  /** The container is being removed. */
  stop(c: Container): Promise<void>;
  /** Engine shutdown. */
  close(): Promise<void>;
}

/** Exec instances (exec/): they end with their container's run. */
export interface ExecsPort {
  forgetContainer(c: Container): void;
}

/** The rooms the core's state machine works with. */
export interface ContainerParts {
  net: NetworkPort;
  mounts: MountsPort;
  stdio: StdioPort;
  logs: LogsPort;
  execs: ExecsPort;
}
