import { conflict, forbidden, invalidParameter, notFound } from '../../../common/errors.js';
import { rfc3339Nano } from '../../../common/time.js';
import {
  broadcastAddress,
  containsIp,
  formatIpv4,
  networkAddress,
  parseCidr,
  parseIpv4,
} from '../../network/ipv4.js';
import { keys } from '../keys.js';
import type { ClusterStore, TxnOp } from '../store/cluster-store.js';
import { isAttachment, type StoredTask } from '../tasks/task.types.js';
import { apiNetwork } from './attachment.js';
import type { IpamOwner } from './network.types.js';
import { networkKeys, parseIpamKey } from './network-keys.js';
import { nextAddress, withPrefix } from './pools.js';
import { findNetwork } from './swarm-networks.js';

/**
 * Network-attachment tasks (issue 14 §9 step 2, "Attachable networks"), on the manager a node
 * asks: a plain container (`docker run --network <overlay>`, `network connect`) on any node gets
 * its address on an attachable swarm network through a task `{Spec: {NetworkAttachmentSpec:
 * {ContainerID}, Networks: [{Target}], Runtime: "attachment"}, NodeID, NetworksAttachments}`,
 * written with its address's claim (`P/ipam/<network>/<ip>`, create-if-absent) in one
 * transaction, as swarmkit's allocator hands out a task's. Its node's picture then carries the
 * network (nodes/node-overlay.ts), every node on it the attachment's FDB and neighbour entries,
 * and its names. The node deletes it (and the claim) when the container leaves the network.
 */

/** `POST /v1/attachments`: the calling node's container joins a network. */
export interface AttachCall {
  ContainerID: string;
  /** The network's ID, name or ID prefix, as the user wrote it. */
  Network: string;
  /** What the container answers to there (its name, short ID, aliases). */
  Names: string[];
  /** The address asked for (`--ip`, IPAMConfig.IPv4Address): claimed exactly, or refused. */
  Address?: string;
  /** `--ip6`: swarm networks have no IPv6 block here, so it is always refused. */
  Address6?: string;
}

export interface AttachAnswer {
  TaskID: string;
  NetworkID: string;
  NetworkName: string;
  /** `10.0.1.5/24`. */
  Address: string;
}

/** `POST /v1/attachments/release`: the container left (one network, or all of them). */
export interface ReleaseCall {
  ContainerID: string;
  /** The network's ID; absent: every network of the container. */
  NetworkID?: string;
}

export interface NodeAttachment {
  TaskID: string;
  ContainerID: string;
  NetworkID: string;
}

const RETRIES = 8;

function notAttachable(name: string): Error {
  return forbidden(`network ${name} not manually attachable`);
}

export async function attachContainer(
  store: ClusterStore,
  nodeId: string,
  call: AttachCall,
  opts: { now: () => Date; newId: () => string },
): Promise<AttachAnswer> {
  for (let attempt = 0; attempt < RETRIES; attempt++) {
    const found = await findNetwork(store, call.Network);
    if (!found) throw notFound(`network ${call.Network} not found`);
    const network = found.network;
    if (!network.Spec.Attachable || network.Spec.Ingress) throw notAttachable(call.Network);
    const config = network.Spec.IPAM.Config[0];
    if (!config) throw notAttachable(call.Network);
    const tasks = await attachmentsOf(store, nodeId);
    const had = tasks.find(
      (t) =>
        t.Spec.NetworkAttachmentSpec?.ContainerID === call.ContainerID &&
        t.NetworksAttachments?.[0]?.Network.ID === network.ID,
    );
    const address = had?.NetworksAttachments?.[0]?.Addresses[0];
    if (had && address)
      return { TaskID: had.ID, NetworkID: network.ID, NetworkName: network.Spec.Name, Address: address };
    if (call.Address6)
      throw invalidParameter(`network ${network.Spec.Name} has no IPv6 pool for ${call.Address6}`);
    const claims = await store.range(networkKeys.ipamOf(network.ID));
    const taken = new Set(claims.kvs.map((kv) => parseIpamKey(kv.key)?.ip ?? ''));
    const ip = call.Address
      ? requestedAddress(config.Subnet, call.Address, taken)
      : nextAddress(config, taken);
    if (!ip) throw conflict(`could not find an available IP while allocating VIP on network ${network.ID}`);
    const ts = rfc3339Nano(opts.now().getTime());
    const id = opts.newId();
    const addr = withPrefix(ip, config.Subnet);
    const task: StoredTask = {
      ID: id,
      CreatedAt: ts,
      UpdatedAt: ts,
      Labels: {},
      Spec: {
        NetworkAttachmentSpec: { ContainerID: call.ContainerID },
        Networks: [{ Target: network.ID }],
        ForceUpdate: 0,
        Runtime: 'attachment',
      },
      ServiceID: '',
      NodeID: nodeId,
      Status: { Timestamp: ts, State: 'running', Message: 'started' },
      DesiredState: 'running',
      NetworksAttachments: [
        { Network: apiNetwork({ value: network, modRevision: found.kv.modRevision }), Addresses: [addr] },
      ],
      _: { specVersion: 0, serviceName: '', names: call.Names.filter((n) => n !== '') },
    };
    const owner: IpamOwner = { kind: 'task', task: id };
    const claimKey = networkKeys.ipam(network.ID, ip);
    const r = await store.txn(
      [
        { key: claimKey, target: 'create', op: 'equal', value: 0 },
        { key: keys.task(id), target: 'create', op: 'equal', value: 0 },
        // the network is still there, as read
        { key: networkKeys.object(network.ID), target: 'mod', op: 'equal', value: found.kv.modRevision },
      ],
      [
        { put: { key: claimKey, value: JSON.stringify(owner) } },
        { put: { key: keys.task(id), value: JSON.stringify(task) } },
      ],
    );
    if (r.succeeded)
      return { TaskID: id, NetworkID: network.ID, NetworkName: network.Spec.Name, Address: addr };
    // taken meanwhile by another holder: the next round says so (a requested address is not moved)
  }
  throw conflict(`could not allocate an address on network ${call.Network}: too many concurrent changes`);
}

/**
 * An address asked for on the block, as libnetwork's IPAM answers a preferred address (the
 * IPRange only bounds what is handed out unasked): outside the block 400 `requested address is
 * out of range`; the network or broadcast address, the gateway or a held one 409 `Address already
 * in use`.
 */
function requestedAddress(subnet: string, wanted: string, taken: ReadonlySet<string>): string {
  const block = parseCidr(subnet);
  const ip = parseIpv4(wanted);
  if (ip === undefined) throw invalidParameter(`invalid IPv4 address: ${wanted}`);
  if (!block || !containsIp(block, ip)) throw invalidParameter('requested address is out of range');
  const text = formatIpv4(ip);
  if (ip === networkAddress(block) || ip === broadcastAddress(block) || taken.has(text))
    throw conflict('Address already in use');
  return text;
}

/** The container's attachment tasks on the node go, with their addresses' claims. */
export async function releaseContainer(
  store: ClusterStore,
  nodeId: string,
  call: ReleaseCall,
): Promise<{ Released: string[] }> {
  const tasks = (await attachmentsOf(store, nodeId)).filter(
    (t) =>
      t.Spec.NetworkAttachmentSpec?.ContainerID === call.ContainerID &&
      (!call.NetworkID || t.NetworksAttachments?.[0]?.Network.ID === call.NetworkID),
  );
  const released: string[] = [];
  for (const t of tasks) {
    const ops: TxnOp[] = [{ delete: { key: keys.task(t.ID) } }];
    for (const a of t.NetworksAttachments ?? []) {
      const ip = a.Addresses[0]?.split('/')[0];
      if (ip) ops.push({ delete: { key: networkKeys.ipam(a.Network.ID, ip) } });
    }
    await store.txn([], ops);
    released.push(t.ID);
  }
  return { Released: released };
}

/** `GET /v1/attachments`: the node's attachment tasks (an engine start drops those of gone containers). */
export async function listAttachments(store: ClusterStore, nodeId: string): Promise<NodeAttachment[]> {
  return (await attachmentsOf(store, nodeId)).map((t) => ({
    TaskID: t.ID,
    ContainerID: t.Spec.NetworkAttachmentSpec?.ContainerID ?? '',
    NetworkID: t.NetworksAttachments?.[0]?.Network.ID ?? '',
  }));
}

async function attachmentsOf(store: ClusterStore, nodeId: string): Promise<StoredTask[]> {
  const all = await store.range(keys.tasks);
  return all.kvs
    .map((kv) => JSON.parse(kv.value) as StoredTask)
    .filter((t) => isAttachment(t) && t.NodeID === nodeId);
}
