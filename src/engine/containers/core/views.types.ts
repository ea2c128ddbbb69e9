import type {
  ContainerConfig,
  EndpointIPAMConfig,
  HostConfig,
  PortBinding,
  StringMap,
} from '../../../common/docker-types.js';
import type { ContainerStatus, HealthState } from './record.types.js';

/**
 * The container as the API shows it, at the newest API version (core/views.ts makes these; the
 * API layer adapts them to older versions). Field names and order are dockerd's.
 */

/** A Mounts entry (inspect and list). */
export interface MountView {
  Type: 'bind' | 'volume' | 'tmpfs' | 'npipe' | 'cluster' | 'image';
  /** Volumes only. */
  Name?: string;
  Source: string;
  Destination: string;
  /** Volumes only. */
  Driver?: string;
  Mode: string;
  RW: boolean;
  Propagation: string;
}

/** One network's endpoint in NetworkSettings.Networks. */
export interface EndpointView {
  IPAMConfig: EndpointIPAMConfig | null;
  Links: string[] | null;
  Aliases: string[] | null;
  NetworkID: string;
  EndpointID: string;
  Gateway: string;
  IPAddress: string;
  IPPrefixLen: number;
  IPv6Gateway: string;
  GlobalIPv6Address: string;
  GlobalIPv6PrefixLen: number;
  MacAddress: string;
  DriverOpts: StringMap | null;
  /** API 1.48+. */
  GwPriority?: number;
  /** API 1.44+. */
  DNSNames?: string[] | null;
}

/**
 * NetworkSettings. From API 1.52 only SandboxID, SandboxKey, Ports and Networks (docker 29 left
 * the rest out); before, dockerd 20.10's whole set.
 */
export interface NetworkSettingsView {
  Bridge?: string;
  SandboxID: string;
  HairpinMode?: boolean;
  LinkLocalIPv6Address?: string;
  LinkLocalIPv6PrefixLen?: number;
  Ports: Record<string, PortBinding[] | null>;
  SandboxKey: string;
  SecondaryIPAddresses?: null;
  SecondaryIPv6Addresses?: null;
  EndpointID?: string;
  Gateway?: string;
  GlobalIPv6Address?: string;
  GlobalIPv6PrefixLen?: number;
  IPAddress?: string;
  IPPrefixLen?: number;
  IPv6Gateway?: string;
  MacAddress?: string;
  Networks: Record<string, EndpointView>;
}

export interface StateView {
  Status: ContainerStatus;
  Running: boolean;
  Paused: boolean;
  Restarting: boolean;
  OOMKilled: boolean;
  Dead: boolean;
  Pid: number;
  ExitCode: number;
  Error: string;
  StartedAt: string;
  FinishedAt: string;
  Health?: HealthState;
}

/** GET /containers/{id}/json. */
export interface ContainerInspect {
  Id: string;
  Created: string;
  Path: string;
  Args: string[];
  State: StateView;
  Image: string;
  ResolvConfPath: string;
  HostnamePath: string;
  HostsPath: string;
  LogPath: string;
  Name: string;
  RestartCount: number;
  Driver: string;
  Platform: string;
  MountLabel: string;
  ProcessLabel: string;
  AppArmorProfile: string;
  ExecIDs: string[] | null;
  /** With dockerd's defaults; keys dockerd leaves out when empty are undefined. */
  HostConfig: HostConfig;
  GraphDriver: { Data: Record<string, string> | null; Name: string };
  SizeRw?: number;
  SizeRootFs?: number;
  Mounts: MountView[];
  Config: ContainerConfig;
  NetworkSettings: NetworkSettingsView;
}

/** A published or exposed port in the list. */
export interface PortView {
  IP?: string;
  PrivatePort: number;
  PublicPort?: number;
  Type: string;
}

/** One row of GET /containers/json. */
export interface ContainerSummary {
  Id: string;
  Names: string[];
  Image: string;
  ImageID: string;
  Command: string;
  Created: number;
  Ports: PortView[];
  SizeRw?: number;
  SizeRootFs?: number;
  Labels: StringMap;
  State: ContainerStatus;
  Status: string;
  HostConfig: { NetworkMode: string; Annotations?: StringMap };
  NetworkSettings: { Networks: Record<string, EndpointView> };
  Mounts: MountView[];
  /** API 1.52+: `none` without a health check. */
  Health?: { Status: 'none' | 'starting' | 'healthy' | 'unhealthy'; FailingStreak: number };
}
