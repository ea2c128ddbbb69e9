/**
 * The cluster state's store: what swarm mode needs of etcd, and nothing else. The engine reaches
 * etcd only through this interface (etcd-store.ts: etcd 3.4's v3 JSON gateway); unit tests use
 * memory-store.ts. Revisions are etcd's: one counter for the whole store, raised by every write;
 * an object's `Version.Index` is its key's `modRevision`.
 */

/** One key as the store holds it. Keys and values are UTF-8 strings (the cluster keeps JSON). */
export interface KeyValue {
  key: string;
  value: string;
  createRevision: number;
  modRevision: number;
  /** Writes to this key since it was created (1 after the first put). */
  version: number;
  /** The lease the key is bound to; '0' for none. */
  lease: string;
}

/** A condition of a transaction, on one key (a missing key has revisions and version 0). */
export type Compare =
  | { key: string; target: 'mod' | 'create' | 'version'; op: CompareOp; value: number }
  | { key: string; target: 'value'; op: CompareOp; value: string };
export type CompareOp = 'equal' | 'not_equal' | 'greater' | 'less';

/** One operation of a transaction's branch. */
export type TxnOp =
  | { put: { key: string; value: string; lease?: string } }
  | { delete: { key: string; prefix?: boolean } }
  | { get: { key: string; prefix?: boolean } };

export interface TxnResult {
  succeeded: boolean;
  /** The store's revision after the transaction. */
  revision: number;
  /** Per `get` operation of the branch taken, in order: the keys it found. */
  gets: KeyValue[][];
}

export interface RangeResult {
  kvs: KeyValue[];
  revision: number;
}

export interface WatchEvent {
  type: 'put' | 'delete';
  /** For a delete: the key and its delete revision (modRevision), value empty. */
  kv: KeyValue;
}

export interface WatchHandlers {
  /** The events of one revision, in order. */
  onEvents(events: WatchEvent[], revision: number): void;
  /** The watch ended on its own (connection lost, compacted revision); it is not resumed. */
  onError(err: Error): void;
}

export interface Watch {
  close(): void;
}

export interface Lease {
  id: string;
  ttl: number;
}

/** The key an elected leader holds; its createRevision guards the leader's writes. */
export interface LeaderKey {
  name: string;
  key: string;
  revision: number;
  lease: string;
}

export interface Member {
  id: string;
  name: string;
  peerUrls: string[];
  clientUrls: string[];
  isLearner: boolean;
}

export interface StoreStatus {
  version: string;
  memberId: string;
  clusterId: string;
  leader: string;
  revision: number;
  raftTerm: number;
  raftIndex: number;
  dbSize: number;
  isLearner: boolean;
}

export interface ClusterStore {
  get(key: string): Promise<KeyValue | undefined>;
  /** Every key starting with `prefix`, in key order. */
  range(prefix: string): Promise<RangeResult>;
  /** Returns the store's revision after the write. */
  put(key: string, value: string, opts?: { lease?: string }): Promise<number>;
  /** Deletes the key (or every key under it with `prefix`); returns how many went. */
  delete(key: string, opts?: { prefix?: boolean }): Promise<number>;
  /** All of `compares` hold: `success` runs, else `failure`; atomically. */
  txn(compares: Compare[], success: TxnOp[], failure?: TxnOp[]): Promise<TxnResult>;

  grantLease(ttlSeconds: number): Promise<Lease>;
  /** Renews the lease; returns its TTL, 0 when it has expired (or never was). */
  keepAlive(leaseId: string): Promise<number>;
  /** Ends the lease now, deleting its keys. */
  revokeLease(leaseId: string): Promise<void>;

  /** Events on keys under `prefix` after `fromRevision` (0: from now). */
  watch(prefix: string, fromRevision: number, handlers: WatchHandlers): Watch;

  /** Waits until this campaigner leads election `name` (bound to `leaseId`), then returns its key. */
  campaign(name: string, leaseId: string, value: string): Promise<LeaderKey>;
  /** The current leader's key and value, if any. */
  leader(name: string): Promise<KeyValue | undefined>;
  resign(leader: LeaderKey): Promise<void>;

  /** Adds a member (as a learner: it does not vote until promoted); returns it and the new list. */
  memberAdd(peerUrls: string[], learner: boolean): Promise<{ member: Member; members: Member[] }>;
  memberPromote(id: string): Promise<Member[]>;
  memberRemove(id: string): Promise<Member[]>;
  memberList(): Promise<Member[]>;
  status(): Promise<StoreStatus>;

  /** Ends open watches and connections. */
  close(): void;
}

/** The exclusive end of the key range holding every key that starts with `prefix` (etcd's rule). */
export function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i] < 0xff) {
      end[i]++;
      return end.subarray(0, i + 1);
    }
  }
  // every byte 0xff (or empty): the range runs to the end of the key space
  return Buffer.from([0]);
}
