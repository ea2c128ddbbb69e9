import type {
  NodeOverlayState,
  OverlayTask,
  OverlayVip,
  TaskAttachment,
} from '../../network/overlay/overlay.types.js';

/**
 * What the agent asks of the node's overlay data plane (src/engine/network/overlay/
 * overlay-networks.ts; a fake in unit tests).
 */
export interface OverlayPort {
  /** The managers' picture of the node's networks (peers, names) changed. */
  sync(state: NodeOverlayState): Promise<void>;
  /** The DNS server a task container on overlay networks gets (the gateway bridge's address). */
  gatewayAddress(): Promise<string>;
  /** A started task container joins its networks and the gateway bridge. */
  attach(task: OverlayTask): Promise<void>;
  /** A plugged sandbox joins one more network as `ifname` (its other interfaces untouched). */
  plugOne(
    taskId: string,
    attachment: TaskAttachment,
    ifname: string,
    opts?: { stale?: boolean },
  ): Promise<void>;
  /** A plugged sandbox leaves one network (that interface goes, the others stay). */
  unplugOne(taskId: string, networkId: string): Promise<void>;
  /** The task's container stopped or went (`unplug`: its sandbox lives on, its interfaces go). */
  detach(taskId: string, opts?: { unplug?: boolean }): Promise<void>;
  attached(taskId: string): boolean;
  /** Whether the managers' picture of the node has the network. */
  knows(networkId: string): boolean;
  /** The VIP tables of the task's networks. */
  vipsFor(taskId: string): OverlayVip[];
  /** Engine start and leave: whatever is plumbed goes. */
  sweep(): Promise<void>;
}
