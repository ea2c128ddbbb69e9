/**
 * Swarm-scope networks as `P/networks/<id>` holds them: the fields dockerd 20.10 shows for an
 * overlay network (GET /networks/{id} on a manager), plus private facts under `_`.
 */

export interface SwarmIpamConfig {
  Subnet: string;
  IPRange?: string;
  Gateway: string;
}

export interface SwarmNetworkSpec {
  Name: string;
  Labels: Record<string, string> | null;
  /** `overlay` (the only driver of swarm networks here). */
  Driver: string;
  /** The user's `--opt`s (the VNI list is added by the view). */
  Options: Record<string, string>;
  Attachable: boolean;
  Ingress: boolean;
  Internal: boolean;
  IPAM: { Driver: string; Options: Record<string, string> | null; Config: SwarmIpamConfig[] };
}

export interface StoredSwarmNetwork {
  ID: string;
  CreatedAt: string;
  Spec: SwarmNetworkSpec;
  _: {
    /** The VXLAN network identifier: 4096 for ingress, 4097 upwards for the others. */
    vni: number;
  };
}

/** The body of POST /networks/create as far as a swarm network reads it. */
export interface SwarmNetworkRequest {
  Name: string;
  Driver: string;
  Attachable?: boolean;
  Ingress?: boolean;
  Internal?: boolean;
  EnableIPv6?: boolean;
  Labels?: Record<string, string> | null;
  Options?: Record<string, string> | null;
  IPAM?: {
    Driver?: string;
    Options?: Record<string, string> | null;
    Config?: Array<{ Subnet?: string; IPRange?: string; Gateway?: string }> | null;
  } | null;
}

/** Who holds an address of a swarm network (`P/ipam/<networkID>/<ip>`'s value). */
export type IpamOwner =
  | { kind: 'gateway' }
  | { kind: 'vip'; service: string }
  | { kind: 'task'; task: string }
  /** A node's ingress sandbox (the routing mesh's end on that node). */
  | { kind: 'node'; node: string };

export const INGRESS_VNI = 4096;
export const FIRST_VNI = 4097;
/** The highest VXLAN network identifier (24 bits). */
export const MAX_VNI = 0xffffff;
export const OVERLAY_VNI_OPTION = 'com.docker.network.driver.overlay.vxlanid_list';

/**
 * A task's network attachment as moby's API shows it (`NetworksAttachments[]`): the swarm API's
 * Network object (Spec with DriverConfiguration and IPAMOptions, DriverState with the VNI list)
 * and the task's addresses with their prefix. Also what a node reads to plumb the network.
 */
export interface SwarmApiNetwork {
  ID: string;
  Version: { Index: number };
  CreatedAt: string;
  UpdatedAt: string;
  Spec: {
    Name: string;
    Labels: Record<string, string>;
    DriverConfiguration: { Name: string; Options?: Record<string, string> };
    Internal?: boolean;
    Attachable?: boolean;
    Ingress?: boolean;
    IPAMOptions: {
      Driver: { Name: string };
      Configs: Array<{ Subnet: string; Range?: string; Gateway: string }>;
    };
    Scope: 'swarm';
  };
  DriverState: { Name: string; Options: Record<string, string> };
  IPAMOptions: {
    Driver: { Name: string };
    Configs: Array<{ Subnet: string; Range?: string; Gateway: string }>;
  };
}
