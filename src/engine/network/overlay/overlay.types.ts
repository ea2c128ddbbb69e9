/**
 * What a node's data plane needs to know of the swarm's overlay networks (the managers send it
 * down the assignments stream: swarm/networks/node-overlay.ts): for each network a task of the
 * node uses, its VNI and block, every attachment's address and the data-path address of its node
 * (the static FDB and neighbour entries), and the names the embedded DNS answers on it.
 */

/** The routing mesh's sandbox on a node: its task ID in the data plane, and dockerd's name for it. */
export const INGRESS_SANDBOX_ID = 'ingress-sbox';

/** One attachment of a task on the network: its address, its MAC (from the address), its node. */
export interface OverlayPeer {
  ip: string;
  mac: string;
  /** The data-path address of the attachment's node (the VXLAN destination). */
  node: string;
}

/** A node the network is in use on: its hostname and advertise address. */
export interface OverlayNode {
  name: string;
  ip: string;
}

/** Names that resolve to `ip` on the network (a task: tasks.<svc>, its container name...; a VIP). */
export interface OverlayName {
  names: string[];
  ip: string;
}

/** A service's VIP on the network and the running tasks behind it. */
export interface OverlayVip {
  service: string;
  vip: string;
  backends: string[];
}

/** What a node shows of the network (`docker network ls/inspect` on a worker): its object's fields. */
export interface OverlayNetworkInfo {
  created: string;
  labels: Record<string, string> | null;
  options: Record<string, string>;
  attachable: boolean;
  internal: boolean;
  ingress: boolean;
  ipRange?: string;
}

export interface OverlayNetworkState {
  id: string;
  name: string;
  info: OverlayNetworkInfo;
  vni: number;
  /** `10.0.1.0/24`. */
  subnet: string;
  gateway: string;
  peers: OverlayPeer[];
  /**
   * The nodes where the network is in use (a live attachment there, or its ingress sandbox):
   * `docker network inspect`'s `Peers` (dockerd: its gossip members on the network).
   */
  nodes: OverlayNode[];
  names: OverlayName[];
  vips: OverlayVip[];
}

/** One port published through the routing mesh, with the running tasks' `ingress` addresses. */
export interface IngressPortState {
  protocol: 'tcp' | 'udp';
  publishedPort: number;
  targetPort: number;
  backends: string[];
}

/** The node's end of the routing mesh: its sandbox's address on `ingress`, the ports it serves. */
export interface NodeIngressState {
  networkId: string;
  /** `10.0.0.5/24`. */
  address: string;
  ports: IngressPortState[];
}

/** The node's whole overlay picture. */
export interface NodeOverlayState {
  /** This node's data-path address (the VXLAN devices' `local`). */
  local: string;
  /** The swarm's DataPathPort (VXLAN's UDP port, 4789 by default). */
  port: number;
  networks: OverlayNetworkState[];
  /** While some service publishes a port through the mesh (and the node has its address). */
  ingress?: NodeIngressState;
}

/** One network a task container joins: its address with the prefix (`10.0.1.5/24`). */
export interface TaskAttachment {
  networkId: string;
  address: string;
}

/**
 * A sandbox to plumb: a task container's network namespace (`/proc/<pid>/ns/net`), or the ingress
 * mesh's (a path), with its attachments in order (`eth0`, `eth1`...).
 */
export interface OverlayTask {
  taskId: string;
  /** The container whose sandbox it is, when not the task ID itself (a task's container). */
  containerId?: string;
  netns: string;
  attachments: TaskAttachment[];
  /** An interface on the gateway bridge with the default route (tasks: yes; the ingress sandbox: no). */
  gateway?: boolean;
  /**
   * The container keeps the network it was created on as `eth0` and its default route (a task
   * with host-mode ports, published on the node's default bridge): the overlay interfaces start
   * at `eth1` and the gateway bridge's interface adds no default route.
   */
  keepsDefaultNetwork?: boolean;
  /**
   * The first overlay interface's number (`eth<N>`), when the sandbox has other interfaces
   * already (a plain container's bridge networks); else 0 (1 with `keepsDefaultNetwork`).
   */
  firstIndex?: number;
  /**
   * The sandbox may still hold interfaces an earlier engine made under the same names (a plain
   * container plugged again after an engine restart): each goes before its name is plugged.
   */
  stale?: boolean;
}

/**
 * What `docker network inspect` shows of a network plumbed on this node (dockerd fills these
 * from libnetwork on the nodes that have the network): its local endpoints and its peers.
 */
export interface OverlayLocalFacts {
  /** Each sandbox on the network here: a container (task or plain) or the ingress sandbox. */
  endpoints: OverlayLocalEndpoint[];
  /** The nodes the network is in use on (hostname, advertise address). */
  peers: OverlayNode[];
}

export interface OverlayLocalEndpoint {
  /** The container ID, or dockerd's sandbox name for the ingress sandbox (`ingress-sbox`). */
  sandbox: string;
  /** The ingress sandbox's endpoint name (`ingress-endpoint`); a container's is its name. */
  name?: string;
  /** A stable ID for an endpoint the container's own settings do not name (a task's). */
  endpointId: string;
  mac: string;
  /** With the prefix: `10.0.1.5/24`. */
  ipv4: string;
}
