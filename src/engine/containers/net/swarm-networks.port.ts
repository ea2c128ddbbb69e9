import type { Endpoint } from '../../network/network.types.js';

/**
 * What a plain container's networking asks of swarm mode for swarm-scoped networks (attachable
 * overlays: `docker run --network <overlay>`, `network connect`), on any node of a swarm. The
 * implementation (swarm/agent/attachments.ts) asks a manager for the container's addresses
 * (network-attachment tasks) and plugs the sandbox into the node's overlay data plane; it is
 * wired in the composition root (daemon.ts).
 */
export interface SwarmNetworkPort {
  /** The node is in a swarm and its agent runs: a name that is no local network may be a swarm one. */
  active(): boolean;
  /**
   * Resolves once the agent runs (true), at once when the node is in no swarm (false), or after a
   * bounded wait: a start of a container naming a network the engine does not have waits for it
   * while the engine is starting (restart-policy containers, restored before the agent is up).
   */
  whenActive(): Promise<boolean>;
  /** The nameserver of a container on swarm networks (the node's gateway bridge address). */
  dnsAddress(): Promise<string>;
  /**
   * Joins the container's sandbox to its swarm networks (every one it is on: on a second call,
   * only the networks that came or went are plugged or unplugged); the endpoints in the order asked. A network that is not
   * attachable: 403 `Could not attach to network <n>: rpc error: code = PermissionDenied desc =
   * network <n> not manually attachable`, as dockerd.
   */
  attach(req: SwarmAttachRequest): Promise<Endpoint[]>;
  /** The interfaces the container's swarm networks made in its sandbox (the gateway bridge's too). */
  interfaces(containerId: string): string[];
  /** The container left its swarm networks (stop, failed start, removal): plumbing and tasks go. */
  detach(containerId: string): Promise<void>;
  /** Live restore: a running container keeps its swarm endpoints (plugged again when the node's picture comes). */
  restore(
    containerId: string,
    sandbox: { sandboxId: string; sandboxKey: string },
    endpoints: Endpoint[],
    usedIfnames?: string[],
  ): void;
}

export interface SwarmAttachRequest {
  containerId: string;
  sandboxId: string;
  sandboxKey: string;
  /**
   * By the name or ID the user gave, with the names the container answers to there and the
   * addresses it asks for (`--ip`, `--ip6`: the manager claims exactly them, or refuses).
   */
  networks: Array<{ network: string; names: string[]; ipv4Address?: string; ipv6Address?: string }>;
  /** The first swarm interface is `eth<firstIndex>` (after the container's bridge interfaces). */
  firstIndex: number;
  /** The sandbox's other interfaces (its bridge networks'): a network connected later takes none of them. */
  usedIfnames: string[];
  /** The default route goes through the gateway bridge (the container's main network is a swarm one). */
  defaultRoute: boolean;
}
