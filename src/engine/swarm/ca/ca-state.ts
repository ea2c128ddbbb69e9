import { keys } from '../keys.js';
import type { StoredCa, StoredCluster, StoredNode } from '../records.js';
import { unseal } from '../seal.js';
import type { ClusterStore } from '../store/cluster-store.js';
import { RootCa, tlsInfoOf } from './root-ca.js';
import { newJoinToken } from './tokens.js';

/**
 * The swarm's roots in etcd and a root rotation (`docker swarm ca --rotate`), as swarmkit runs
 * one: `P/ca/next` holds the new root and its certificate cross-signed by the current one. While
 * it is there, every node trusts both roots, and certificates come from the new root with the
 * cross-signed one after them (a node that still trusts only the old root accepts them). Once
 * every node that is up holds a certificate from the new root, the new root replaces the old
 * (`P/ca/root`), the join tokens get its digest and RootRotationInProgress ends.
 */

export interface CaState {
  root: StoredCa;
  rootRevision: number;
  next?: StoredCa;
  nextRevision?: number;
}

/** What a node is to trust and which root signs its certificates now (heartbeat answers, the managers' watch). */
export interface TrustState {
  /** The PEM bundle the node trusts: the root, and during a rotation the new root after it. */
  TrustRoots: string;
  /** The root whose certificates the node should hold (the new one during a rotation). */
  Issuer: string;
}

export async function loadCaState(store: ClusterStore): Promise<CaState> {
  const [root, next] = await Promise.all([store.get(keys.caRoot), store.get(keys.caNext)]);
  if (!root) throw new Error('the swarm has no root CA');
  return {
    root: JSON.parse(root.value) as StoredCa,
    rootRevision: root.modRevision,
    ...(next ? { next: JSON.parse(next.value) as StoredCa, nextRevision: next.modRevision } : {}),
  };
}

export function trustState(state: CaState): TrustState {
  return {
    TrustRoots: state.root.cert + (state.next?.cert ?? ''),
    Issuer: state.next?.cert ?? state.root.cert,
  };
}

/**
 * The root that signs node and peer certificates now (the new one during a rotation), its
 * certificates followed by its cross-signed certificate once a rotation made one.
 */
export function signingCa(state: CaState, dek: Buffer): RootCa {
  const { next, root } = state;
  if (next) {
    return new RootCa({ certPem: next.cert, keyPem: unseal(dek, next.key) }).withChain(
      next.crossSigned ?? '',
    );
  }
  return new RootCa({ certPem: root.cert, keyPem: unseal(dek, root.key) }).withChain(root.crossSigned ?? '');
}

/**
 * Ends the rotation when every node that is up (its liveness key present) reports a certificate
 * from the new root: one transaction that compares what it read, so managers may all try.
 * Answers whether it switched.
 */
export async function finishRotationIfDone(store: ClusterStore, now: Date): Promise<boolean> {
  const state = await loadCaState(store);
  if (!state.next) return false;
  const want = tlsInfoOf(state.next.cert).CertIssuerPublicKey;
  const [nodes, lives, cluster] = await Promise.all([
    store.range(keys.nodes),
    store.range(keys.lives),
    store.get(keys.cluster),
  ]);
  if (!cluster) return false;
  const up = new Set(lives.kvs.map((kv) => kv.key.slice(keys.lives.length)));
  for (const kv of nodes.kvs) {
    const node = JSON.parse(kv.value) as StoredNode;
    if (!up.has(node.ID)) continue;
    if (node.Description.TLSInfo?.CertIssuerPublicKey !== want) return false;
  }
  const c = JSON.parse(cluster.value) as StoredCluster;
  const next: StoredCluster = {
    ...c,
    UpdatedAt: now.toISOString(),
    RootRotationInProgress: false,
    JoinTokens: { Worker: newJoinToken(state.next.cert), Manager: newJoinToken(state.next.cert) },
  };
  // the cross-signed certificate stays: an etcd member reads its trusted roots only at start, so
  // one started before the rotation still trusts only the old root, and takes peer certificates
  // of the new root through it
  const root: StoredCa = {
    cert: state.next.cert,
    key: state.next.key,
    ...(state.next.crossSigned ? { crossSigned: state.next.crossSigned } : {}),
  };
  const res = await store.txn(
    [
      { key: keys.caNext, target: 'mod', op: 'equal', value: state.nextRevision ?? 0 },
      { key: keys.cluster, target: 'mod', op: 'equal', value: cluster.modRevision },
    ],
    [
      { put: { key: keys.caRoot, value: JSON.stringify(root) } },
      { delete: { key: keys.caNext } },
      { put: { key: keys.cluster, value: JSON.stringify(next) } },
    ],
  );
  return res.succeeded;
}

/** The CA part of a new Swarm spec, as the update asks for it. */
export interface RotationRequest {
  SigningCACert?: string;
  SigningCAKey?: string;
  /** Whether ForceRotate changed. */
  forced: boolean;
}

/**
 * The new root an update asks for, or undefined when it asks for none: a SigningCACert that is
 * neither the current root nor the rotation's target (with its key), or a changed ForceRotate (a
 * fresh root, or the given one). Throws Error with swarmkit's reason for a bad cert or key.
 */
export function requestedRoot(req: RotationRequest, state: CaState, now: Date): RootCa | undefined {
  const given = req.SigningCACert?.trim();
  const known = [state.root.cert, state.next?.cert].filter((c): c is string => !!c).map((c) => c.trim());
  const isKnown = given !== undefined && given !== '' && known.includes(given);
  if (given && !isKnown) {
    if (!req.SigningCAKey) {
      throw new Error(
        'if a signing CA certificate is given without an external CA, its key must be given too',
      );
    }
    return RootCa.fromUser(req.SigningCACert ?? '', req.SigningCAKey, now);
  }
  if (!req.forced) return undefined;
  if (given && req.SigningCAKey) return RootCa.fromUser(req.SigningCACert ?? '', req.SigningCAKey, now);
  return RootCa.create(now);
}
