/**
 * The VIP load balancer the agent drives (built by the swarm-lb work in src/engine/network/lb/,
 * wired by the engine): per task container, the whole table of the VIPs of its networks with
 * the running tasks behind each. Nothing is balanced on a node that is given none (the DNS still
 * answers a vip service's name with its VIP).
 */
export interface VipBackendSet {
  vip: string;
  /** IPv4 addresses, no prefix. */
  backends: string[];
}

export interface ServiceLb {
  /** Replaces the whole VIP table in one container's network namespace (idempotent). */
  apply(sandboxKey: string, vips: VipBackendSet[]): Promise<void>;
  clear(sandboxKey: string): Promise<void>;
}
