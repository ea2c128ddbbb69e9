import type { PortPublisher } from './ports/port-publisher.js';

/** The networks every engine has; user-defined networks are bridge networks named by the user. */
export type PredefinedNetwork = 'bridge' | 'host' | 'none';

/** The engine's default bridge network, as set up at engine start. */
export interface BridgeInfo {
  /** The `bridge` network's ID (64 hex, kept across restarts). */
  id: string;
  created: string;
  /** The Linux bridge (`berth0` unless `--bridge`). */
  name: string;
  /** The CNI network name (host-local's directory). */
  cniName: string;
  subnet: string;
  gateway: string;
  prefixLen: number;
  /** Whether inspect's IPAM.Config shows the gateway (dockerd does when it was given or found). */
  gatewayInConfig: boolean;
}

/** What releasing a sandbox's bridge plumbing needs (the endpoint carries it). */
export interface BridgePlumbing {
  name: string;
  cniName: string;
  subnet: string;
  gateway: string;
  /** false: no default route through this interface (not the main network, or Internal). */
  defaultRoute?: boolean;
  mtu?: number;
  /** The network's IPv6 block and gateway (EnableIPv6 networks). */
  subnet6?: string;
  gateway6?: string;
}

/** A container's endpoint while it runs; persisted in its record (live restore). */
export interface Endpoint {
  /** The network's name (a predefined one, or a user-defined network's). */
  network: string;
  networkId: string;
  endpointId: string;
  sandboxId: string;
  /** The network namespace file of a bridge sandbox ('' for none and host). */
  sandboxKey: string;
  ipAddress: string;
  prefixLen: number;
  gateway: string;
  macAddress: string;
  /** The IPv6 address, prefix length and gateway on an EnableIPv6 network. */
  ipv6Address?: string;
  ipv6PrefixLen?: number;
  ipv6Gateway?: string;
  /** The bridge it is plugged into (bridge endpoints only). */
  bridge?: BridgePlumbing;
  /** The interface in the sandbox (`eth0` when absent: records of engines before user networks). */
  ifname?: string;
  /** What the engine's DNS answers for it (user-defined networks): kept for a live restore. */
  dns?: EndpointDns;
  /**
   * An endpoint on a swarm network (an attachable overlay): the network-attachment task that
   * holds its address on a manager. Plumbed and released by swarm mode, not by this layer.
   */
  swarm?: { taskId: string };
}

/** An endpoint's names in the engine's DNS, and where its other queries go. */
export interface EndpointDns {
  names: string[];
  upstreams?: string[];
  ndotsSet?: boolean;
  /** Legacy links on the network: `alias` resolves to container `name` for this endpoint only. */
  links?: Array<{ alias: string; name: string }>;
}

/** One interface a sandbox has on a bridge: what a CNI DEL of it needs. */
export interface PlumbedInterface {
  ifname: string;
  bridge: BridgePlumbing;
  /**
   * The addresses host-local gave it (IPv4, IPv6): with them a release needs no CNI DEL (the
   * namespace's removal deletes the veth, the allocation files go); without (a sweep), a DEL.
   */
  addresses?: string[];
}

/** What a release needs: the sandbox, and the bridges it was plumbed on. */
export interface ReleaseTarget {
  sandboxId: string;
  sandboxKey: string;
  /** The sandbox's interfaces on bridges (each gets a CNI DEL). */
  plumbed: PlumbedInterface[];
}

/** One network a sandbox joins: by ID or name, with the static address or MAC asked for. */
export interface AttachRequest {
  network: string;
  ipv4Address?: string;
  ipv6Address?: string;
  macAddress?: string;
  /** Its names in the engine's DNS (used on user-defined networks only). */
  dns?: EndpointDns;
}

/** A bridge attachment under way (start): the namespace first, the endpoints when CNI is done. */
export interface PendingAttach extends ReleaseTarget {
  /** Resolves once the namespace exists (the runtime may join it from then on). */
  ready: Promise<void>;
  /** Resolves with the endpoints (in the order asked) once the CNI plugins configured the namespace. */
  endpoints: Promise<Endpoint[]>;
}

/** A running container as the network inspect's `Containers` map shows it. */
export interface AttachedContainer {
  id: string;
  /** Without the leading slash. */
  name: string;
  endpoint: Endpoint;
}

/** What the containers service asks of the network layer. */
export interface ContainerNetworking {
  /** The default bridge; null when the engine runs with `--bridge none`. */
  readonly bridge: BridgeInfo | null;
  /** What `host-gateway` in ExtraHosts stands for: `--host-gateway-ip`, else the default bridge's address. */
  readonly hostGateway?: string;
  /** Port publishing for containers on bridges (ports/port-publisher.ts). */
  readonly ports: PortPublisher;
  networkId(name: PredefinedNetwork): string;
  /** Whether `idOrName` names a user-defined network (a container's NetworkMode may). */
  isUserNetwork(idOrName: string): boolean;
  /** The network's name and ID; notFound when there is none. */
  lookup(idOrName: string): { id: string; name: string; builtin: boolean };
  /** A running endpoint's names changed (the container was renamed): the DNS answers the new ones. */
  updateDns(ep: Endpoint): void;
  /** Whether containers on the network get IPv6 addresses (a user-defined EnableIPv6 network with a block). */
  ipv6Enabled(idOrName: string): boolean;
  /** The address of the engine's DNS responder for a user-defined network (undefined: none). */
  dnsAddress(idOrName: string): string | undefined;
  /** Check a container's wish for a network at create/connect (400s: static address, aliases). */
  checkEndpoint(
    idOrName: string,
    req: { ipv4Address?: string; ipv6Address?: string; aliases?: boolean },
  ): void;
  /**
   * Start attaching a container to bridge networks (a new sandbox per start): the first request
   * is its main network (the default route); the interfaces are eth0, eth1... in order.
   */
  attach(requests: AttachRequest[]): PendingAttach;
  /** `network connect` of a running container: one more interface in its sandbox. */
  attachMore(
    sandbox: { sandboxId: string; sandboxKey: string },
    req: AttachRequest,
    ifname: string,
  ): Promise<Endpoint>;
  /** `network disconnect` of a running container: that interface goes (CNI DEL). */
  detachOne(sandbox: { sandboxId: string; sandboxKey: string }, ep: Endpoint): Promise<void>;
  /** An endpoint on `none` or `host` (nothing to set up on the host). */
  plainEndpoint(network: 'none' | 'host'): Endpoint;
  /**
   * Undo a sandbox's plumbing (CNI DEL, namespace removed) in the background; the promise is for
   * whoever wants to wait. Failures are logged; what is left is swept at the next engine start.
   */
  release(target: ReleaseTarget): Promise<void>;
  /** Endpoints of containers found running at engine start (their sandboxes are kept). */
  restore(endpoint: Endpoint): void;
  /** Release every sandbox and IP allocation no running container holds (engine start). */
  sweep(): Promise<void>;
  /**
   * `network connect` / `disconnect` events, as dockerd emits them around start and die (`swarm`:
   * a swarm network's, which this layer does not know: its ID, type `overlay`).
   */
  announce(
    action: 'connect' | 'disconnect',
    containerId: string,
    network: string,
    swarm?: { id: string },
  ): void;
  /** Who is attached (inspect's Containers); the containers service provides it. */
  setContainerSource(source: () => AttachedContainer[]): void;
}

/** How much of a block is taken (network inspect's Status.IPAM.Subnets values, API 1.52). */
export interface SubnetStatus {
  IPsInUse: number;
  DynamicIPsAvailable: number;
}

/** Network inspect's `Status` (API 1.52): the IPAM state by block (`172.17.0.0/16`). */
export interface NetworkStatus {
  IPAM: { Subnets?: Record<string, SubnetStatus> };
}

/** One IPAM.Config entry of a user-defined network, as inspect shows it (Gateway filled in once chosen). */
export interface IpamConfigEntry {
  Subnet: string;
  IPRange?: string;
  Gateway?: string;
  AuxiliaryAddresses?: Record<string, string>;
}
