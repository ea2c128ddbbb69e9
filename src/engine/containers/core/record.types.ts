import type { ContainerConfig, EndpointSettings } from '../../../common/docker-types.js';
import type { Endpoint } from '../../network/network.types.js';
import type { PublishedPort } from '../../network/ports/port-spec.js';

/**
 * What the engine keeps of a container (`<data-root>/containers/<id>/config.v2.json`, beside
 * hostconfig.json): the record and its parts. The rooms read and change these; only core/store.ts
 * writes them.
 */

/** Container states as the API names them (list State, inspect State.Status). */
export type ContainerStatus =
  | 'created'
  | 'restarting'
  | 'running'
  | 'removing'
  | 'paused'
  | 'exited'
  | 'dead';

export interface HealthLogEntry {
  Start: string;
  End: string;
  ExitCode: number;
  Output: string;
}

export interface HealthState {
  Status: 'starting' | 'healthy' | 'unhealthy' | 'none';
  FailingStreak: number;
  Log: HealthLogEntry[];
}

/** Persisted state (part of config.v2.json). */
export interface ContainerState {
  Status: ContainerStatus;
  Running: boolean;
  Paused: boolean;
  Restarting: boolean;
  OOMKilled: boolean;
  Dead: boolean;
  RemovalInProgress: boolean;
  Pid: number;
  ExitCode: number;
  Error: string;
  StartedAt: string;
  FinishedAt: string;
  Health?: HealthState;
}

export interface NetworkingConfig {
  EndpointsConfig?: Record<string, EndpointSettings | null> | null;
}

/** Everything persisted for one container in `<data-root>/containers/<id>/config.v2.json`. */
export interface ContainerRecord {
  ID: string;
  /** RFC 3339 with nanoseconds. */
  Created: string;
  Path: string;
  Args: string[];
  /** The merged configuration (request + image defaults). */
  Config: ContainerConfig;
  /** Image ID (`sha256:...`). */
  Image: string;
  /** Name with leading slash. */
  Name: string;
  Driver: string;
  Platform: string;
  RestartCount: number;
  HasBeenStartedBefore: boolean;
  HasBeenManuallyStopped: boolean;
  MountLabel: string;
  ProcessLabel: string;
  AppArmorProfile: string;
  State: ContainerState;
  ResolvConfPath: string;
  HostnamePath: string;
  HostsPath: string;
  LogPath: string;
  NetworkingConfig: NetworkingConfig;
  /** The network namespace file of the current or last bridge run ('' when none yet). */
  SandboxKey: string;
  /**
   * The network sandbox of the current or last run: dockerd keeps showing its ID, key and network
   * ID after the container stopped.
   */
  Sandbox?: SandboxRecord;
  /** The main network endpoint while the container runs (address, MAC...); gone once it stopped. */
  Endpoint?: Endpoint;
  /** Every endpoint while the container runs, the main one first (Endpoint is the first). */
  Endpoints?: Endpoint[];
  /** A `network connect`/`disconnect` happened: NetworkingConfig.EndpointsConfig lists its networks. */
  NetworksExplicit?: boolean;
  /** The host ports published while the container runs (NetworkSettings.Ports; live restore). */
  PublishedPorts?: PublishedPort[];
  /** Legacy links (HostConfig.Links, resolved at create to the containers they name). */
  Links?: LinkRecord[];
  /** Volumes, image mounts and VolumesFrom mounts resolved at create (binds and tmpfs stay in HostConfig). */
  MountPoints?: MountPoint[];
  /** Read-only binds are not recursively read-only (created before API 1.44, as dockerd kept them). */
  ReadOnlyNonRecursive?: boolean;
  /**
   * A removal was asked for with `v` (its anonymous volumes go too): saved with
   * `State.RemovalInProgress` before the removal begins, so that the next engine start finishes a
   * removal a crash cut short as it was asked.
   */
  RemoveVolumes?: boolean;
  /** Container labels for events are Config.Labels. */
}

export interface SandboxRecord {
  ID: string;
  /** The namespace file ('' when the runtime made the namespace, or the host's). */
  Key: string;
  /** `bridge`, `none` or `host`. */
  Network: string;
  NetworkID: string;
}

export const ZERO_TIME = '0001-01-01T00:00:00Z';

/** A legacy link as the parent's record keeps it: the target by ID, and its name when last seen. */
export interface LinkRecord {
  alias: string;
  /** The linked (child) container's ID. */
  id: string;
  /** Its name with the leading slash (shown once it is gone, as dockerd does). */
  name: string;
}

/**
 * A container's mount that is not simply in its HostConfig: a volume (named, anonymous, from
 * `Config.Volumes` or an image's `VOLUME`), or a mount inherited through `VolumesFrom`. Kept in
 * the container's record (`MountPoints`), as dockerd keeps them in config.v2.json.
 */
export interface MountPoint {
  Type: 'volume' | 'bind' | 'image';
  /** Volume name (volumes), the image as given (image mounts). */
  Name?: string;
  /** The host path: the volume's data, the bind's source, the image snapshot's mount. */
  Source: string;
  Destination: string;
  Driver?: string;
  Mode: string;
  RW: boolean;
  Propagation: string;
  /** Copy the image's content at Destination into the (empty) volume on the first start. */
  CopyData?: boolean;
  /** A directory of the volume or image to mount instead of its root (API 1.45 / 1.48). */
  Subpath?: string;
  /** Image mounts: the image's ID (rmi sees the container using it) and the snapshot of it. */
  ImageID?: string;
  Snapshot?: string;
}
