/**
 * The two load-balancing pieces of swarm mode's data plane (docs/networking.md, "Swarm load
 * balancing"): service VIPs inside each task container's namespace, and the ingress routing mesh
 * of a node. The kernel here has no IPVS, so both are nftables NAT (lb/*.ts).
 */

/** A service's virtual IP on one network and the addresses it spreads over (IPv4, no prefix). */
export interface VipBackendSet {
  vip: string;
  backends: string[];
}

export interface ServiceLb {
  /** Replaces the whole VIP table in one container's network namespace (idempotent). */
  apply(sandboxKey: string, vips: VipBackendSet[]): Promise<void>;
  clear(sandboxKey: string): Promise<void>;
}

/** One ingress-published port: what reaches `publishedPort` on the node goes to a backend's `targetPort`. */
export interface IngressPort {
  protocol: 'tcp' | 'udp';
  publishedPort: number;
  targetPort: number;
  /** The tasks' addresses on the ingress network (IPv4, no prefix). */
  backends: string[];
}

export interface IngressMesh {
  /**
   * Makes the node's ingress sandbox (a netns with a link to the host) if absent; returns its
   * netns path. The overlay code then attaches that namespace to the `ingress` overlay network
   * like a task (an address and the subnet's route, no default route: the sandbox's default
   * route is its link to the host).
   */
  ensureSandbox(): Promise<{ sandboxKey: string }>;
  /** Replaces the node's whole set of ingress-published ports. */
  apply(ports: IngressPort[]): Promise<void>;
  /** Removes sandbox, links and rules (swarm leave; engine start after kill -9). */
  remove(): Promise<void>;
}
