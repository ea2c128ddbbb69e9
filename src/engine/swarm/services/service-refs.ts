import { forbidden, notFound } from '../../../common/errors.js';
import { keys, PREFIX } from '../keys.js';
import { networkKeys } from '../networks/network-keys.js';
import { objectKeys } from '../secrets/object-keys.js';
import type { ObjectKind } from '../secrets/secrets.types.js';
import { rpcInvalid } from '../secrets/validate.js';
import type { ClusterStore, Compare, TxnOp } from '../store/cluster-store.js';
import type { ServiceSpec } from './service.types.js';
import { specNetworks } from './service-spec.js';

/**
 * What a service spec names outside itself, resolved as dockerd and swarmkit do: networks (a
 * name becomes the network's ID; a local network is refused), secrets and configs (a reference
 * by name alone gets its ID; an ID that does not exist is swarmkit's `secret not found: <name>`).
 */

/** The engine's own (local-scope) networks, as far as services need them. */
export interface LocalNetworks {
  /** The local network with this ID, name or ID prefix, if any. */
  find(ref: string): { name: string } | undefined;
}

const PREDEFINED = new Set(['bridge', 'host', 'none']);

interface StoredNetwork {
  ID: string;
  Spec?: { Name?: string; Ingress?: boolean };
}

async function findSwarmNetwork(store: ClusterStore, ref: string): Promise<StoredNetwork | undefined> {
  if (ref === '' || ref.includes('/')) return undefined;
  const byId = await store.get(networkKeys.object(ref));
  if (byId) return JSON.parse(byId.value) as StoredNetwork;
  const named = await store.get(keys.name('networks', ref));
  const byName = named ? await store.get(networkKeys.object(named.value)) : undefined;
  if (byName) return JSON.parse(byName.value) as StoredNetwork;
  const prefixed = await store.range(networkKeys.object(ref));
  if (prefixed.kvs.length === 1 && prefixed.kvs[0]) return JSON.parse(prefixed.kvs[0].value) as StoredNetwork;
  return undefined;
}

/** Turns each network Target of the spec into the swarm network's ID (dockerd's populateNetworkID). */
export async function resolveNetworks(
  store: ClusterStore,
  local: LocalNetworks | undefined,
  spec: ServiceSpec,
): Promise<void> {
  for (const n of specNetworks(spec)) {
    const target = n.Target ?? '';
    const network = await findSwarmNetwork(store, target);
    if (network) {
      if (network.Spec?.Ingress) {
        throw rpcInvalid(
          `Service cannot be explicitly attached to the ingress network ${JSON.stringify(network.Spec.Name ?? '')}`,
        );
      }
      n.Target = network.ID;
      continue;
    }
    const ln = local?.find(target);
    if (ln && PREDEFINED.has(ln.name)) {
      throw notFound(
        `could not find the corresponding predefined swarm network: network ${ln.name} not found`,
      );
    }
    if (ln) {
      throw forbidden(
        `The network ${ln.name} cannot be used with services. Only networks scoped to the swarm can be used, such as those created with the overlay driver.`,
      );
    }
    throw notFound(`network ${target} not found`);
  }
}

async function findObjectId(store: ClusterStore, kind: ObjectKind, name: string): Promise<string> {
  const claim = await store.get(objectKeys(kind).name(name));
  if (!claim) throw notFound(`${kind} ${name} not found`);
  return claim.value;
}

/** A reference given by name alone gets the object's ID (404 when there is none by that name). */
export async function resolveObjectNames(store: ClusterStore, spec: ServiceSpec): Promise<void> {
  const c = spec.TaskTemplate?.ContainerSpec;
  for (const ref of c?.Secrets ?? []) {
    if (!ref.SecretID && ref.SecretName) ref.SecretID = await findObjectId(store, 'secret', ref.SecretName);
  }
  for (const ref of c?.Configs ?? []) {
    if (!ref.ConfigID && ref.ConfigName) ref.ConfigID = await findObjectId(store, 'config', ref.ConfigName);
  }
}

/**
 * A secret's or config's use key, `P/uses/<kind>s/<id>`: written by every service txn that
 * refers to the object and compared by the object's removal, so that a removal that found no
 * service using it cannot succeed once one has come to use it meanwhile.
 */
export const useKey = (kind: ObjectKind, id: string) => `${PREFIX}/uses/${kind}s/${id}`;

/**
 * swarmkit's checkSecretExistence and checkConfigExistence: every referenced ID is there, else
 * 400 `secret not found: <names>`. Returns what keeps it so in the write's txn: compares on the
 * objects (still the ones seen) and the puts of their use keys.
 */
export async function checkObjectsExist(
  store: ClusterStore,
  spec: ServiceSpec,
): Promise<{ compares: Compare[]; ops: TxnOp[] }> {
  const c = spec.TaskTemplate?.ContainerSpec;
  const compares: Compare[] = [];
  const uses = new Set<string>();
  const check = async (kind: ObjectKind, refs: { id: string; name: string }[]) => {
    const missing: string[] = [];
    for (const ref of refs) {
      const key = objectKeys(kind).object(ref.id);
      const kv = ref.id.includes('/') ? undefined : await store.get(key);
      if (!kv) missing.push(ref.name);
      else if (!uses.has(useKey(kind, ref.id))) {
        compares.push({ key, target: 'create', op: 'equal', value: kv.createRevision });
        uses.add(useKey(kind, ref.id));
      }
    }
    if (missing.length > 0) {
      throw rpcInvalid(`${kind}${missing.length > 1 ? 's' : ''} not found: ${missing.join(', ')}`);
    }
  };
  await check(
    'secret',
    (c?.Secrets ?? []).map((r) => ({ id: r.SecretID ?? '', name: r.SecretName ?? '' })),
  );
  await check(
    'config',
    (c?.Configs ?? []).map((r) => ({ id: r.ConfigID ?? '', name: r.ConfigName ?? '' })),
  );
  return { compares, ops: [...uses].map((key) => ({ put: { key, value: spec.Name ?? '' } })) };
}

/** Whether a stored service spec refers to this secret or config ID. */
export function usesObject(spec: ServiceSpec | undefined, kind: ObjectKind, id: string): boolean {
  const c = spec?.TaskTemplate?.ContainerSpec;
  if (kind === 'secret') return (c?.Secrets ?? []).some((r) => r.SecretID === id);
  return (c?.Configs ?? []).some((r) => r.ConfigID === id);
}
