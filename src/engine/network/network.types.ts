/** The networks every engine has (user-defined networks are a later addition). */
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
}

/** A container's endpoint while it runs; persisted in its record (live restore). */
export interface Endpoint {
  network: PredefinedNetwork;
  networkId: string;
  endpointId: string;
  sandboxId: string;
  /** The network namespace file of a bridge sandbox ('' for none and host). */
  sandboxKey: string;
  ipAddress: string;
  prefixLen: number;
  gateway: string;
  macAddress: string;
  /** The bridge it is plugged into (bridge endpoints only). */
  bridge?: BridgePlumbing;
}

/** What a release needs: the sandbox, and the bridge network it was plumbed on. */
export interface ReleaseTarget {
  sandboxId: string;
  sandboxKey: string;
  bridge?: BridgePlumbing;
}

/** A bridge attachment under way (start): the namespace first, the endpoint when CNI is done. */
export interface PendingAttach extends ReleaseTarget {
  /** Resolves once the namespace exists (the runtime may join it from then on). */
  ready: Promise<void>;
  /** Resolves with the endpoint once the CNI plugins configured the namespace. */
  endpoint: Promise<Endpoint>;
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
  networkId(name: PredefinedNetwork): string;
  /** Start attaching a container to the default bridge (a new sandbox per start). */
  attachBridge(opts: { macAddress?: string }): PendingAttach;
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
  /** `network connect` / `disconnect` events, as dockerd emits them around start and die. */
  announce(action: 'connect' | 'disconnect', containerId: string, network: PredefinedNetwork): void;
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
