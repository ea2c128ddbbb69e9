/**
 * The node's routing mesh as the agent drives it (built by the swarm-lb work in
 * src/engine/network/lb/ as `IngressMesh`, wired by the engine): a sandbox namespace the overlay
 * attaches to `ingress` like a task, and the node's whole set of ingress-published ports.
 */
export interface IngressPort {
  protocol: 'tcp' | 'udp';
  publishedPort: number;
  targetPort: number;
  /** The tasks' addresses on the ingress network (IPv4, no prefix). */
  backends: string[];
}

export interface IngressMesh {
  /** Makes the node's ingress sandbox if absent; returns its netns path. */
  ensureSandbox(): Promise<{ sandboxKey: string }>;
  /** Replaces the node's whole set of ingress-published ports. */
  apply(ports: IngressPort[]): Promise<void>;
  /** Removes sandbox, links and rules (swarm leave; engine start after kill -9). */
  remove(): Promise<void>;
}
