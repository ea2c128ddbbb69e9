import { PREFIX } from '../keys.js';
import { rpcInvalid } from '../secrets/validate.js';
import type { Compare, TxnOp } from '../store/cluster-store.js';
import type { PortConfig, ServiceSpec, StoredService } from './service.types.js';

/**
 * Published ports of services. An ingress port is claimed under `P/ports/<proto>/<port>` (value:
 * the service ID) in the service's own txn, only if absent, so no two services ever hold one; a
 * PublishedPort of 0 takes the lowest free port of 30000–32767, kept across updates. Conflicts
 * answer swarmkit's words (checkPortConflicts): an ingress port against any published port of
 * another service, a host-mode port against another service's ingress port.
 */

export const portKeys = {
  all: `${PREFIX}/ports/`,
  port: (protocol: string, port: number) => `${PREFIX}/ports/${protocol}/${port}`,
};

export const DYNAMIC_FIRST = 30000;
export const DYNAMIC_LAST = 32767;

const proto = (p: PortConfig) => p.Protocol ?? 'tcp';
const isIngress = (p: PortConfig) => (p.PublishMode ?? 'ingress') === 'ingress';

/** swarmkit's conflict checks against the other services' specs and endpoints. */
export function checkPortConflicts(spec: ServiceSpec, others: StoredService[]): void {
  const ingress = new Set<string>();
  const host = new Set<string>();
  for (const p of spec.EndpointSpec?.Ports ?? []) {
    if (!p.PublishedPort) continue;
    (isIngress(p) ? ingress : host).add(`${p.PublishedPort}/${proto(p)}`);
  }
  if (ingress.size === 0 && host.size === 0) return;
  for (const svc of others) {
    const theirs = [...(svc.Spec.EndpointSpec?.Ports ?? []), ...(svc.Endpoint?.Ports ?? [])];
    for (const p of theirs) {
      if (!p.PublishedPort) continue;
      const key = `${p.PublishedPort}/${proto(p)}`;
      const name = svc.Spec.Name ?? '';
      if (!isIngress(p) && ingress.has(key)) {
        throw rpcInvalid(
          `port '${p.PublishedPort}' is already in use by service '${name}' (${svc.ID}) as a host-published port`,
        );
      }
      if (isIngress(p) && (ingress.has(key) || host.has(key))) {
        throw rpcInvalid(
          `port '${p.PublishedPort}' is already in use by service '${name}' (${svc.ID}) as an ingress port`,
        );
      }
    }
  }
}

export interface PortPlan {
  /** Endpoint.Ports: the spec's ports with each ingress port's PublishedPort assigned. */
  ports: PortConfig[];
  /** The txn's guards and writes for the claims (new ones absent, kept ones still ours). */
  compares: Compare[];
  ops: TxnOp[];
}

/**
 * Assigns and claims the ingress ports of `spec` for service `id`. `claimed` is every claimed
 * `<proto>/<port>` (key suffix) with its holder; `previous` the service's Endpoint.Ports before
 * an update (its dynamic ports are kept for the same target and protocol).
 */
export function planPorts(
  id: string,
  spec: ServiceSpec,
  claimed: Map<string, string>,
  previous: PortConfig[] = [],
  nameOf: (serviceId: string) => string = () => '',
): PortPlan {
  const mine = new Set<string>();
  const ports: PortConfig[] = [];
  const taken = (key: string) => mine.has(key) || (claimed.has(key) && claimed.get(key) !== id);
  const reusable = previous.filter((p) => isIngress(p) && p.PublishedPort);
  for (const p of spec.EndpointSpec?.Ports ?? []) {
    const out: PortConfig = { ...p };
    if (isIngress(p)) {
      let port = p.PublishedPort ?? 0;
      if (port === 0) {
        const again = reusable.find(
          (q) =>
            q.TargetPort === p.TargetPort &&
            proto(q) === proto(p) &&
            !mine.has(`${proto(p)}/${q.PublishedPort}`) &&
            claimed.get(`${proto(p)}/${q.PublishedPort}`) === id,
        );
        port = again?.PublishedPort ?? 0;
        for (let n = DYNAMIC_FIRST; port === 0 && n <= DYNAMIC_LAST; n++) {
          if (!taken(`${proto(p)}/${n}`)) port = n;
        }
        if (port === 0)
          throw rpcInvalid('could not allocate a published port: the range 30000-32767 is used up');
      }
      const key = `${proto(p)}/${port}`;
      if (taken(key)) {
        const holder = claimed.get(key) ?? '';
        throw rpcInvalid(
          `port '${port}' is already in use by service '${nameOf(holder)}' (${holder}) as an ingress port`,
        );
      }
      mine.add(key);
      // Endpoint.Ports in dockerd's field order
      const { Name, Protocol, TargetPort, PublishMode } = out;
      ports.push({
        ...(Name ? { Name } : {}),
        Protocol,
        ...(TargetPort ? { TargetPort } : {}),
        PublishedPort: port,
        PublishMode,
      });
      continue;
    }
    ports.push(out);
  }
  const compares: Compare[] = [];
  const ops: TxnOp[] = [];
  for (const key of mine) {
    const full = `${portKeys.all}${key}`;
    if (claimed.get(key) === id) {
      compares.push({ key: full, target: 'value', op: 'equal', value: id });
    } else {
      compares.push({ key: full, target: 'create', op: 'equal', value: 0 });
      ops.push({ put: { key: full, value: id } });
    }
  }
  for (const [key, holder] of claimed) {
    if (holder === id && !mine.has(key)) ops.push({ delete: { key: `${portKeys.all}${key}` } });
  }
  return { ports, compares, ops };
}
