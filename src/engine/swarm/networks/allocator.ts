import type { Versioned } from '../orchestrator/cluster-view.js';
import type { Plan } from '../orchestrator/plan.js';
import { isLive } from '../orchestrator/task-life.js';
import type { StoredService } from '../services/service.types.js';
import { specNetworks } from '../services/service-spec.js';
import { isTerminal, type NetworkAttachment, type StoredTask } from '../tasks/task.types.js';
import { apiNetwork } from './attachment.js';
import type { IpamOwner, StoredSwarmNetwork } from './network.types.js';
import { nextAddress, withPrefix } from './pools.js';
import { ingressPorts } from './swarm-networks.js';

/**
 * The leader's network allocator, one step of each reconcile pass (swarmkit's allocator):
 * - each service in `vip` mode gets a VIP on each of its networks (`Endpoint.VirtualIPs`
 *   `{NetworkID, Addr}`); one with ingress-published ports is also on `ingress`;
 * - each task of such a service that has no attachments yet gets one per network
 *   (`NetworksAttachments [{Network, Addresses: ["10.0.1.5/24"]}]`) before a node may run it;
 * - an address is claimed under `P/ipam/<networkID>/<ip>` in the same transaction as its
 *   holder (create-if-absent: never handed out twice), and released once its holder (the task,
 *   the service's VIP) is gone from the store.
 * A network whose block is full leaves the task unallocated (and so not run) until one frees.
 */
export function allocateNetworks(plan: Plan): void {
  const taken = takenAddresses(plan);
  const claim = (network: Versioned<StoredSwarmNetwork>, owner: IpamOwner): string | undefined => {
    const config = network.value.Spec.IPAM.Config[0];
    if (!config) return undefined;
    const used = taken.get(network.value.ID) ?? new Set<string>();
    taken.set(network.value.ID, used);
    const ip = nextAddress(config, used);
    if (!ip) return undefined;
    used.add(ip);
    plan.ipamClaims.set(`${network.value.ID}/${ip}`, owner);
    return withPrefix(ip, config.Subnet);
  };

  for (const [id, service] of plan.services) allocateVips(plan, id, service, claim);
  allocateIngressSandboxes(plan, claim);
  for (const task of plan.tasks.values()) {
    if (task.NetworksAttachments !== undefined || !needsAddresses(task)) continue;
    const service = plan.services.get(task.ServiceID);
    if (!service) continue;
    const networks = serviceNetworks(plan, service, task);
    if (networks.length === 0) continue;
    const attachments: NetworkAttachment[] = [];
    let complete = true;
    for (const n of networks) {
      const addr = claim(n, { kind: 'task', task: task.ID });
      if (!addr) {
        complete = false;
        break;
      }
      attachments.push({ Network: apiNetwork(n), Addresses: [addr] });
    }
    if (!complete) {
      // give back what this task got in this pass; it waits for a free address
      for (const [key, owner] of [...plan.ipamClaims]) {
        if (owner.kind === 'task' && owner.task === task.ID) {
          plan.ipamClaims.delete(key);
          taken.get(key.slice(0, key.indexOf('/')))?.delete(key.slice(key.indexOf('/') + 1));
        }
      }
      plan.unallocated.add(task.ID);
      continue;
    }
    task.NetworksAttachments = attachments;
  }
}

/** The ingress network, if the swarm has one. */
function ingressNetwork(plan: Plan): Versioned<StoredSwarmNetwork> | undefined {
  return [...plan.snap.networks.values()].find((n) => n.value.Spec.Ingress);
}

/** Some service publishes a port through the routing mesh. */
function meshInUse(plan: Plan): boolean {
  return [...plan.services.values()].some((s) => ingressPorts(s));
}

/**
 * While some service publishes a port through the routing mesh, every node gets an address on
 * `ingress` for its ingress sandbox (swarmkit's per-node `ingress-sbox` attachment): the owner
 * `{kind: node}` of its claim says whose.
 */
function allocateIngressSandboxes(
  plan: Plan,
  claim: (n: Versioned<StoredSwarmNetwork>, owner: IpamOwner) => string | undefined,
): void {
  const ingress = ingressNetwork(plan);
  if (!ingress || !meshInUse(plan)) return;
  const held = new Set<string>();
  for (const [key, c] of plan.snap.ipam) {
    if (c.value.kind === 'node' && key.startsWith(`${ingress.value.ID}/`)) held.add(c.value.node);
  }
  for (const id of plan.snap.nodes.keys()) if (!held.has(id)) claim(ingress, { kind: 'node', node: id });
}

/** A task that may still run and has no addresses yet (a new one, or one waiting for a node). */
function needsAddresses(task: StoredTask): boolean {
  return isLive(task) && !isTerminal(task.Status.State);
}

/** The service's swarm networks, in its spec's order, then `ingress` for ingress-published ports. */
function serviceNetworks(
  plan: Plan,
  service: StoredService,
  task?: StoredTask,
): Versioned<StoredSwarmNetwork>[] {
  const targets = task?.Spec.Networks ?? specNetworks(service.Spec);
  const out: Versioned<StoredSwarmNetwork>[] = [];
  for (const t of targets) {
    const n = plan.snap.networks.get(t.Target ?? '');
    if (n && !out.includes(n)) out.push(n);
  }
  if (ingressPorts(service)) {
    const ingress = [...plan.snap.networks.values()].find((n) => n.value.Spec.Ingress);
    if (ingress && !out.includes(ingress)) out.push(ingress);
  }
  return out;
}

function allocateVips(
  plan: Plan,
  id: string,
  service: StoredService,
  claim: (n: Versioned<StoredSwarmNetwork>, owner: IpamOwner) => string | undefined,
): void {
  const vip = (service.Spec.EndpointSpec?.Mode ?? 'vip') === 'vip';
  const wanted = vip ? serviceNetworks(plan, service) : [];
  const current = service.Endpoint?.VirtualIPs ?? [];
  const next: { NetworkID: string; Addr: string }[] = [];
  for (const n of wanted) {
    const had = current.find((v) => v.NetworkID === n.value.ID);
    if (had) next.push(had);
    else {
      const addr = claim(n, { kind: 'vip', service: id });
      if (addr) next.push({ NetworkID: n.value.ID, Addr: addr });
    }
  }
  const same = next.length === current.length && next.every((v, i) => v === current[i]);
  if (same) return;
  const endpoint = { ...(service.Endpoint ?? {}) };
  if (next.length > 0) endpoint.VirtualIPs = next;
  else delete endpoint.VirtualIPs;
  service.Endpoint = endpoint;
}

/** Addresses held in the store or claimed in this pass, by network. */
function takenAddresses(plan: Plan): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  const add = (key: string) => {
    const slash = key.indexOf('/');
    const net = key.slice(0, slash);
    const set = out.get(net) ?? new Set<string>();
    set.add(key.slice(slash + 1));
    out.set(net, set);
  };
  for (const key of plan.snap.ipam.keys()) add(key);
  for (const key of plan.ipamClaims.keys()) add(key);
  return out;
}

/** Claims whose holder is gone: a deleted task, a service gone or whose VIP there went. */
export function releaseAddresses(plan: Plan): void {
  for (const [key, claim] of plan.snap.ipam) {
    const owner = claim.value;
    const slash = key.indexOf('/');
    const networkId = key.slice(0, slash);
    const addr = key.slice(slash + 1);
    let held = true;
    if (owner.kind === 'task') held = plan.tasks.has(owner.task);
    else if (owner.kind === 'node') held = plan.snap.nodes.has(owner.node) && meshInUse(plan);
    else if (owner.kind === 'vip') {
      const svc = plan.services.get(owner.service);
      held =
        svc?.Endpoint?.VirtualIPs?.some((v) => v.NetworkID === networkId && v.Addr.split('/')[0] === addr) ??
        false;
    }
    if (!held) plan.ipamReleases.add(key);
  }
}
