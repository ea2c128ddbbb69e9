import type {
  ClusterStore,
  Compare,
  KeyValue,
  LeaderKey,
  Lease,
  Member,
  RangeResult,
  StoreStatus,
  TxnOp,
  TxnResult,
  Watch,
  WatchEvent,
  WatchHandlers,
} from './cluster-store.js';

/**
 * An in-memory ClusterStore with etcd's semantics (one revision counter, create/mod revisions
 * and versions, leases that delete their keys when they expire, prefix watches, elections by
 * lowest create revision, members), for unit tests. Time comes from `now` (a fake clock in
 * tests); expired leases are collected at every call and by `expireLeases()`.
 */
export class MemoryStore implements ClusterStore {
  private readonly kvs = new Map<string, KeyValue>();
  private readonly leases = new Map<string, { ttl: number; expiresAt: number }>();
  private readonly watchers = new Set<{ prefix: string; handlers: WatchHandlers }>();
  private readonly campaigns: { key: string; resolve: () => void }[] = [];
  private members: Member[] = [
    { id: '1', name: 'default', peerUrls: ['http://localhost:2380'], clientUrls: [], isLearner: false },
  ];
  private revision = 1;
  private nextLease = 0x1000;
  private nextMember = 2;
  /** The member etcd would call leader (set by a test to move the leadership). */
  raftLeader = '1';
  /** Set to fail every call with this error (a lost quorum, a dead member). */
  failWith?: Error;

  constructor(private readonly now: () => number = Date.now) {}

  async get(key: string): Promise<KeyValue | undefined> {
    this.enter();
    const v = this.kvs.get(key);
    return v ? { ...v } : undefined;
  }

  async range(prefix: string): Promise<RangeResult> {
    this.enter();
    return { kvs: this.under(prefix).map((v) => ({ ...v })), revision: this.revision };
  }

  async put(key: string, value: string, opts: { lease?: string } = {}): Promise<number> {
    this.enter();
    this.applyPut(key, value, opts.lease, ++this.revision);
    this.flushEvents();
    return this.revision;
  }

  async delete(key: string, opts: { prefix?: boolean } = {}): Promise<number> {
    this.enter();
    const keys = opts.prefix ? this.under(key).map((v) => v.key) : this.kvs.has(key) ? [key] : [];
    if (keys.length === 0) return 0;
    const rev = ++this.revision;
    for (const k of keys) this.applyDelete(k, rev);
    this.flushEvents();
    return keys.length;
  }

  async txn(compares: Compare[], success: TxnOp[], failure: TxnOp[] = []): Promise<TxnResult> {
    this.enter();
    const succeeded = compares.every((c) => this.holds(c));
    const ops = succeeded ? success : failure;
    const writes = ops.some((op) => !('get' in op));
    const rev = writes ? ++this.revision : this.revision;
    const gets: KeyValue[][] = [];
    for (const op of ops) {
      if ('put' in op) this.applyPut(op.put.key, op.put.value, op.put.lease, rev);
      else if ('delete' in op) {
        const keys = op.delete.prefix ? this.under(op.delete.key).map((v) => v.key) : [op.delete.key];
        for (const k of keys) if (this.kvs.has(k)) this.applyDelete(k, rev);
      } else {
        gets.push(
          (op.get.prefix
            ? this.under(op.get.key)
            : [this.kvs.get(op.get.key)].filter((v) => v !== undefined)
          ).map((v) => ({ ...v })),
        );
      }
    }
    this.flushEvents();
    return { succeeded, revision: this.revision, gets };
  }

  async grantLease(ttlSeconds: number): Promise<Lease> {
    this.enter();
    const id = String(this.nextLease++);
    this.leases.set(id, { ttl: ttlSeconds, expiresAt: this.now() + ttlSeconds * 1000 });
    return { id, ttl: ttlSeconds };
  }

  async keepAlive(leaseId: string): Promise<number> {
    this.enter();
    const lease = this.leases.get(leaseId);
    if (!lease) return 0;
    lease.expiresAt = this.now() + lease.ttl * 1000;
    return lease.ttl;
  }

  async revokeLease(leaseId: string): Promise<void> {
    this.enter();
    this.dropLease(leaseId);
    this.flushEvents();
  }

  /** Deletes the keys of every lease whose time is up. */
  expireLeases(): void {
    const now = this.now();
    for (const [id, lease] of [...this.leases]) if (lease.expiresAt <= now) this.dropLease(id);
    this.flushEvents();
  }

  watch(prefix: string, _fromRevision: number, handlers: WatchHandlers): Watch {
    const w = { prefix, handlers };
    this.watchers.add(w);
    return { close: () => this.watchers.delete(w) };
  }

  async campaign(name: string, leaseId: string, value: string): Promise<LeaderKey> {
    this.enter();
    if (!this.leases.has(leaseId)) throw new Error('etcdserver: requested lease not found');
    const key = `${name}/${Number(leaseId).toString(16)}`;
    if (!this.kvs.has(key)) await this.put(key, value, { lease: leaseId });
    for (;;) {
      const mine = this.kvs.get(key);
      if (!mine) throw new Error('election: session expired');
      const first = this.under(`${name}/`).sort((a, b) => a.createRevision - b.createRevision)[0];
      if (first?.key === key) return { name, key, revision: mine.createRevision, lease: leaseId };
      await new Promise<void>((resolve) => this.campaigns.push({ key, resolve }));
    }
  }

  async leader(name: string): Promise<KeyValue | undefined> {
    this.enter();
    const first = this.under(`${name}/`).sort((a, b) => a.createRevision - b.createRevision)[0];
    return first ? { ...first } : undefined;
  }

  async resign(leader: LeaderKey): Promise<void> {
    await this.delete(leader.key);
  }

  async memberAdd(peerUrls: string[], learner: boolean): Promise<{ member: Member; members: Member[] }> {
    this.enter();
    const m: Member = {
      id: String(this.nextMember++),
      name: '',
      peerUrls,
      clientUrls: [],
      isLearner: learner,
    };
    this.members.push(m);
    return { member: { ...m }, members: this.members.map((x) => ({ ...x })) };
  }

  async memberPromote(id: string): Promise<Member[]> {
    this.enter();
    const m = this.members.find((x) => x.id === id);
    if (!m) throw new Error('etcdserver: member not found');
    if (!m.isLearner) throw new Error('etcdserver: can only promote a learner member');
    m.isLearner = false;
    return this.members.map((x) => ({ ...x }));
  }

  async memberRemove(id: string): Promise<Member[]> {
    this.enter();
    if (!this.members.some((x) => x.id === id)) throw new Error('etcdserver: member not found');
    this.members = this.members.filter((x) => x.id !== id);
    return this.members.map((x) => ({ ...x }));
  }

  async memberList(): Promise<Member[]> {
    this.enter();
    return this.members.map((x) => ({ ...x }));
  }

  async status(): Promise<StoreStatus> {
    this.enter();
    return {
      version: '3.4.23',
      memberId: '1',
      clusterId: '1',
      leader: this.raftLeader,
      revision: this.revision,
      raftTerm: 2,
      raftIndex: this.revision,
      dbSize: 0,
      isLearner: false,
    };
  }

  close(): void {
    this.watchers.clear();
  }

  private pending: WatchEvent[] = [];

  private enter(): void {
    if (this.failWith) throw this.failWith;
    this.expireLeases();
  }

  private under(prefix: string): KeyValue[] {
    return [...this.kvs.values()]
      .filter((v) => v.key.startsWith(prefix))
      .sort((a, b) => (a.key < b.key ? -1 : 1));
  }

  private holds(c: Compare): boolean {
    const v = this.kvs.get(c.key);
    const actual =
      c.target === 'value'
        ? (v?.value ?? '')
        : c.target === 'mod'
          ? (v?.modRevision ?? 0)
          : c.target === 'create'
            ? (v?.createRevision ?? 0)
            : (v?.version ?? 0);
    switch (c.op) {
      case 'equal':
        return actual === c.value;
      case 'not_equal':
        return actual !== c.value;
      case 'greater':
        return actual > c.value;
      case 'less':
        return actual < c.value;
    }
  }

  private applyPut(key: string, value: string, lease: string | undefined, rev: number): void {
    if (lease && lease !== '0' && !this.leases.has(lease))
      throw new Error('etcdserver: requested lease not found');
    const old = this.kvs.get(key);
    const v: KeyValue = {
      key,
      value,
      createRevision: old?.createRevision ?? rev,
      modRevision: rev,
      version: (old?.version ?? 0) + 1,
      lease: lease ?? '0',
    };
    this.kvs.set(key, v);
    this.pending.push({ type: 'put', kv: { ...v } });
  }

  private applyDelete(key: string, rev: number): void {
    this.kvs.delete(key);
    this.pending.push({
      type: 'delete',
      kv: { key, value: '', createRevision: 0, modRevision: rev, version: 0, lease: '0' },
    });
  }

  private dropLease(id: string): void {
    if (!this.leases.delete(id)) return;
    const keys = [...this.kvs.values()].filter((v) => v.lease === id).map((v) => v.key);
    if (keys.length === 0) return;
    const rev = ++this.revision;
    for (const k of keys) this.applyDelete(k, rev);
  }

  /** Hands the writes since the last flush to the watchers, and wakes campaigners. */
  private flushEvents(): void {
    const events = this.pending;
    this.pending = [];
    if (events.length === 0) return;
    for (const w of [...this.watchers]) {
      const mine = events.filter((e) => e.kv.key.startsWith(w.prefix));
      if (mine.length > 0) w.handlers.onEvents(mine, this.revision);
    }
    for (const c of this.campaigns.splice(0)) c.resolve();
  }
}
