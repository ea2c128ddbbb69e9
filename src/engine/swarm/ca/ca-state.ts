import type { KeyObject } from 'node:crypto';
import { ETCD_PEER_CN } from '../etcd/etcd-args.js';
import { keys } from '../keys.js';
import type { StoredCa, StoredCluster, StoredNode } from '../records.js';
import { unseal } from '../seal.js';
import type { ClusterStore } from '../store/cluster-store.js';
import type { ExternalCa } from '../swarm.types.js';
import { type CfsslTransport, ExternalCaSigner } from './external-ca.js';
import { checkRootCertificate, type NodeRole, RootCa, tlsInfoOf } from './root-ca.js';
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

/** What signs node and etcd peer certificates now: the root's key, or an external CA for it. */
export interface CertSigner {
  /** The root the certificates chain to (TLSInfo's issuer). */
  readonly rootPem: string;
  issueNode(
    csr: { pem: string; key: KeyObject },
    nodeId: string,
    role: NodeRole,
    clusterId: string,
    expiryMs: number,
    now: Date,
  ): Promise<string>;
  issueEtcdPeer(
    csr: { pem: string; key: KeyObject },
    hosts: string[],
    expiryMs: number,
    now: Date,
  ): Promise<string>;
}

/** The external CAs configured for `rootPem`: cfssl ones whose CACert is it (none: the current root). */
export function externalCasFor(
  cas: ExternalCa[] | undefined,
  rootPem: string,
  isCurrent: boolean,
): ExternalCa[] {
  return (cas ?? []).filter(
    (ca) =>
      ca.Protocol.toLowerCase() === 'cfssl' && (ca.CACert ? ca.CACert.trim() === rootPem.trim() : isCurrent),
  );
}

/**
 * The signer now (swarmkit's order): the root that signs (the new one during a rotation) through
 * an external CA configured for it if there is one, else with its key; its certificates followed
 * by its cross-signed certificate once a rotation made one.
 */
export function signerFor(
  state: CaState,
  dek: Buffer,
  externalCas: ExternalCa[] | undefined,
  transport?: CfsslTransport,
): CertSigner {
  const record = state.next ?? state.root;
  const chain = record.crossSigned ?? '';
  const external = externalCasFor(externalCas, record.cert, !state.next);
  if (external.length > 0) {
    const ca = new ExternalCaSigner(external, trustState(state).TrustRoots, transport);
    return {
      rootPem: record.cert,
      issueNode: async (csr, nodeId, role, clusterId, _expiryMs, _now) =>
        (await ca.sign({
          csrPem: csr.pem,
          commonName: nodeId,
          organizationalUnit: `swarm-${role}`,
          organization: clusterId,
          hosts: [`swarm-${role}`, nodeId],
        })) + chain,
      issueEtcdPeer: async (csr, hosts) =>
        (await ca.sign({ csrPem: csr.pem, commonName: ETCD_PEER_CN, hosts })) + chain,
    };
  }
  if (!record.key) {
    throw new Error('the swarm root CA has no key here and no external CA is configured for it');
  }
  const root = new RootCa({ certPem: record.cert, keyPem: unseal(dek, record.key) }).withChain(chain);
  return {
    rootPem: record.cert,
    issueNode: async (csr, nodeId, role, clusterId, expiryMs, now) =>
      root.issueNode(nodeId, role, clusterId, expiryMs, csr.key, now).certPem,
    issueEtcdPeer: async (csr, hosts, expiryMs, now) =>
      root.issueEtcdPeer(ETCD_PEER_CN, hosts, expiryMs, now, csr.key).certPem,
  };
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
  ExternalCAs?: ExternalCa[];
  /** Whether ForceRotate changed. */
  forced: boolean;
}

/** A new root: its certificate, and its key unless an external CA signs for it. */
export interface NewRoot {
  certPem: string;
  keyPem?: string;
}

/**
 * The new root an update asks for, or undefined when it asks for none: a SigningCACert that is
 * neither the current root nor the rotation's target (with its key, or an external CA configured
 * for it), or a changed ForceRotate (a fresh root, or the given one). Throws Error with the
 * reason for a bad certificate or key.
 */
export function requestedRoot(req: RotationRequest, state: CaState, now: Date): NewRoot | undefined {
  const given = hasPem(req.SigningCACert) ? req.SigningCACert?.trim() : undefined;
  if (req.SigningCAKey && !given) throw new Error(KEY_WITHOUT_CERT);
  const known = [state.root.cert, state.next?.cert].filter((c): c is string => !!c).map((c) => c.trim());
  if (!given || known.includes(given)) {
    if (!req.forced) return undefined;
    const fresh = RootCa.create(now);
    return { certPem: fresh.certPem, keyPem: fresh.material.keyPem };
  }
  return givenRoot({ ...req, SigningCACert: given }, false, now);
}

/** swarmkit's words for a key given without its certificate. */
const KEY_WITHOUT_CERT = 'if a signing CA key is provided, the signing CA cert must also be provided';
/** ... and for a certificate given without its key and no external CA for it. */
const NO_EXTERNAL_CA =
  'there must be at least one valid, reachable external CA corresponding to the desired CA certificate';

function hasPem(text: string | undefined): boolean {
  return !!text && text.includes('-----BEGIN CERTIFICATE-----');
}

/** A root given by SigningCACert: with its key, or with an external CA configured for it. */
function givenRoot(
  config: { SigningCACert?: string; SigningCAKey?: string; ExternalCAs?: ExternalCa[] },
  isCurrent: boolean,
  now: Date,
): NewRoot {
  if (config.SigningCAKey) {
    const root = RootCa.fromUser(config.SigningCACert ?? '', config.SigningCAKey, now);
    return { certPem: root.certPem, keyPem: root.material.keyPem };
  }
  const certPem = checkRootCertificate(config.SigningCACert ?? '', now);
  if (externalCasFor(config.ExternalCAs, certPem, isCurrent).length === 0) throw new Error(NO_EXTERNAL_CA);
  return { certPem };
}

/**
 * The root of a new swarm: the spec's SigningCACert with its SigningCAKey, or with an external CA
 * configured for it (the swarm then holds no key), or a fresh one.
 */
export function initialRoot(
  config: { SigningCACert?: string; SigningCAKey?: string; ExternalCAs?: ExternalCa[] },
  now: Date,
): NewRoot {
  const given = hasPem(config.SigningCACert);
  if (config.SigningCAKey && !given) throw new Error(KEY_WITHOUT_CERT);
  if (!given) {
    const fresh = RootCa.create(now);
    return { certPem: fresh.certPem, keyPem: fresh.material.keyPem };
  }
  return givenRoot(config, true, now);
}
