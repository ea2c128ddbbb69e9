import type { IncomingMessage } from 'node:http';
import {
  type ClusterStore,
  type Compare,
  type KeyValue,
  type LeaderKey,
  type Lease,
  type Member,
  prefixEnd,
  type RangeResult,
  type StoreStatus,
  type TxnOp,
  type TxnResult,
  type Watch,
  type WatchEvent,
  type WatchHandlers,
} from './cluster-store.js';
import { EtcdError, EtcdGateway, type GatewayEndpoint, type GatewayOptions } from './etcd-gateway.js';

/** The gateway's JSON (protobuf names; int64 as strings; zero values left out). */
interface WireHeader {
  cluster_id?: string;
  member_id?: string;
  revision?: string;
  raft_term?: string;
}
interface WireKv {
  key?: string;
  value?: string;
  create_revision?: string;
  mod_revision?: string;
  version?: string;
  lease?: string;
}
interface WireRange {
  header?: WireHeader;
  kvs?: WireKv[];
}
interface WireTxn {
  header?: WireHeader;
  succeeded?: boolean;
  responses?: { response_range?: WireRange }[];
}
interface WireMember {
  ID?: string;
  name?: string;
  peerURLs?: string[];
  clientURLs?: string[];
  isLearner?: boolean;
}
interface WireMembers {
  member?: WireMember;
  members?: WireMember[];
}
interface WireLeaderKey {
  name?: string;
  key?: string;
  rev?: string;
  lease?: string;
}
interface WireWatchLine {
  result?: {
    header?: WireHeader;
    created?: boolean;
    canceled?: boolean;
    cancel_reason?: string;
    compact_revision?: string;
    events?: { type?: 'PUT' | 'DELETE'; kv?: WireKv }[];
  };
  error?: { message?: string; code?: number };
}

const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');
const unb64 = (s: string | undefined): string => Buffer.from(s ?? '', 'base64').toString('utf8');
const int = (s: string | undefined): number => (s ? Number(s) : 0);

function kv(w: WireKv): KeyValue {
  return {
    key: unb64(w.key),
    value: unb64(w.value),
    createRevision: int(w.create_revision),
    modRevision: int(w.mod_revision),
    version: int(w.version),
    lease: w.lease ?? '0',
  };
}

function member(w: WireMember): Member {
  return {
    id: w.ID ?? '0',
    name: w.name ?? '',
    peerUrls: w.peerURLs ?? [],
    clientUrls: w.clientURLs ?? [],
    isLearner: w.isLearner === true,
  };
}

function rangeOf(key: string, prefix: boolean | undefined): { key: string; range_end?: string } {
  return prefix
    ? { key: b64(key), range_end: prefixEnd(Buffer.from(key)).toString('base64') }
    : { key: b64(key) };
}

const TARGET = { mod: 'MOD', create: 'CREATE', version: 'VERSION', value: 'VALUE' } as const;
const FIELD = { mod: 'mod_revision', create: 'create_revision', version: 'version', value: 'value' } as const;

function wireCompare(c: Compare): Record<string, string> {
  const value = c.target === 'value' ? b64(c.value) : String(c.value);
  return { key: b64(c.key), target: TARGET[c.target], result: c.op.toUpperCase(), [FIELD[c.target]]: value };
}

function wireOp(op: TxnOp): Record<string, unknown> {
  if ('put' in op) {
    const { key, value, lease } = op.put;
    return {
      request_put: { key: b64(key), value: b64(value), ...(lease && lease !== '0' ? { lease } : {}) },
    };
  }
  if ('delete' in op) return { request_delete_range: rangeOf(op.delete.key, op.delete.prefix) };
  return { request_range: rangeOf(op.get.key, op.get.prefix) };
}

/** ClusterStore over one etcd 3.4 member's v3 JSON gateway. */
export class EtcdStore implements ClusterStore {
  private readonly gateway: EtcdGateway;
  private readonly watches = new Set<AbortController>();

  constructor(endpoint: GatewayEndpoint, opts?: GatewayOptions) {
    this.gateway = new EtcdGateway(endpoint, opts);
  }

  async get(key: string): Promise<KeyValue | undefined> {
    const res = await this.gateway.call<WireRange>('/v3/kv/range', rangeOf(key, false));
    return res.kvs?.[0] ? kv(res.kvs[0]) : undefined;
  }

  async range(prefix: string): Promise<RangeResult> {
    const res = await this.gateway.call<WireRange>('/v3/kv/range', rangeOf(prefix, true));
    return { kvs: (res.kvs ?? []).map(kv), revision: int(res.header?.revision) };
  }

  async put(key: string, value: string, opts: { lease?: string } = {}): Promise<number> {
    const body = wireOp({ put: { key, value, ...(opts.lease ? { lease: opts.lease } : {}) } }).request_put;
    const res = await this.gateway.call<{ header?: WireHeader }>('/v3/kv/put', body);
    return int(res.header?.revision);
  }

  async delete(key: string, opts: { prefix?: boolean } = {}): Promise<number> {
    const res = await this.gateway.call<{ deleted?: string }>(
      '/v3/kv/deleterange',
      rangeOf(key, opts.prefix),
    );
    return int(res.deleted);
  }

  async txn(compares: Compare[], success: TxnOp[], failure: TxnOp[] = []): Promise<TxnResult> {
    const res = await this.gateway.call<WireTxn>('/v3/kv/txn', {
      compare: compares.map(wireCompare),
      success: success.map(wireOp),
      failure: failure.map(wireOp),
    });
    const succeeded = res.succeeded === true;
    const branch = succeeded ? success : failure;
    const gets: KeyValue[][] = [];
    branch.forEach((op, i) => {
      if ('get' in op) gets.push((res.responses?.[i]?.response_range?.kvs ?? []).map(kv));
    });
    return { succeeded, revision: int(res.header?.revision), gets };
  }

  async grantLease(ttlSeconds: number): Promise<Lease> {
    const res = await this.gateway.call<{ ID?: string; TTL?: string; error?: string }>('/v3/lease/grant', {
      TTL: String(ttlSeconds),
    });
    if (res.error) throw new EtcdError(res.error, -1, 200);
    return { id: res.ID ?? '0', ttl: int(res.TTL) };
  }

  async keepAlive(leaseId: string): Promise<number> {
    const res = await this.gateway.call<{ result?: { TTL?: string } }>('/v3/lease/keepalive', {
      ID: leaseId,
    });
    return int(res.result?.TTL);
  }

  async revokeLease(leaseId: string): Promise<void> {
    try {
      await this.gateway.call('/v3/lease/revoke', { ID: leaseId });
    } catch (err) {
      // a lease already gone is what revoking wants
      if (!(err instanceof EtcdError && err.message.includes('requested lease not found'))) throw err;
    }
  }

  watch(prefix: string, fromRevision: number, handlers: WatchHandlers): Watch {
    const abort = new AbortController();
    this.watches.add(abort);
    let ended = false;
    const end = (err?: Error) => {
      if (ended) return;
      ended = true;
      this.watches.delete(abort);
      abort.abort();
      if (err) handlers.onError(err);
    };
    const request = {
      create_request: {
        ...rangeOf(prefix, true),
        ...(fromRevision > 0 ? { start_revision: String(fromRevision) } : {}),
      },
    };
    this.gateway.stream('/v3/watch', request, abort.signal).then(
      (res) =>
        readLines(res, (line) => {
          const msg = JSON.parse(line) as WireWatchLine;
          if (msg.error)
            return end(new EtcdError(msg.error.message ?? 'watch failed', msg.error.code ?? -1, 200));
          const result = msg.result;
          if (!result) return;
          if (result.canceled) {
            const why = result.compact_revision
              ? `revision ${result.compact_revision} compacted`
              : result.cancel_reason;
            return end(new EtcdError(`watch canceled: ${why ?? 'by the server'}`, -1, 200));
          }
          const events: WatchEvent[] = (result.events ?? []).map((e) => ({
            type: e.type === 'DELETE' ? 'delete' : 'put',
            kv: kv(e.kv ?? {}),
          }));
          if (events.length > 0 && !ended) handlers.onEvents(events, int(result.header?.revision));
        }).then(
          () => end(new EtcdError('watch stream ended', -1, 0)),
          (err: Error) => end(err),
        ),
      (err: Error) => end(err),
    );
    return { close: () => end() };
  }

  async campaign(name: string, leaseId: string, value: string): Promise<LeaderKey> {
    const abort = new AbortController();
    this.watches.add(abort);
    try {
      const res = await this.gateway.stream(
        '/v3/election/campaign',
        { name: b64(name), lease: leaseId, value: b64(value) },
        abort.signal,
      );
      const chunks: Buffer[] = [];
      for await (const c of res) chunks.push(c as Buffer);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { leader?: WireLeaderKey };
      const l = body.leader ?? {};
      return { name: unb64(l.name), key: unb64(l.key), revision: int(l.rev), lease: l.lease ?? '0' };
    } finally {
      this.watches.delete(abort);
    }
  }

  async leader(name: string): Promise<KeyValue | undefined> {
    try {
      const res = await this.gateway.call<{ kv?: WireKv }>('/v3/election/leader', { name: b64(name) });
      return res.kv ? kv(res.kv) : undefined;
    } catch (err) {
      if (err instanceof EtcdError && err.message.includes('election: no leader')) return undefined;
      throw err;
    }
  }

  async resign(leader: LeaderKey): Promise<void> {
    await this.gateway.call('/v3/election/resign', {
      leader: {
        name: b64(leader.name),
        key: b64(leader.key),
        rev: String(leader.revision),
        lease: leader.lease,
      },
    });
  }

  async memberAdd(peerUrls: string[], learner: boolean): Promise<{ member: Member; members: Member[] }> {
    const res = await this.gateway.call<WireMembers>('/v3/cluster/member/add', {
      peerURLs: peerUrls,
      isLearner: learner,
    });
    return { member: member(res.member ?? {}), members: (res.members ?? []).map(member) };
  }

  async memberPromote(id: string): Promise<Member[]> {
    const res = await this.gateway.call<WireMembers>('/v3/cluster/member/promote', { ID: id });
    return (res.members ?? []).map(member);
  }

  async memberRemove(id: string): Promise<Member[]> {
    const res = await this.gateway.call<WireMembers>('/v3/cluster/member/remove', { ID: id });
    return (res.members ?? []).map(member);
  }

  async memberList(): Promise<Member[]> {
    const res = await this.gateway.call<WireMembers>('/v3/cluster/member/list', {});
    return (res.members ?? []).map(member);
  }

  async status(): Promise<StoreStatus> {
    const res = await this.gateway.call<{
      header?: WireHeader;
      version?: string;
      dbSize?: string;
      leader?: string;
      raftIndex?: string;
      raftTerm?: string;
      isLearner?: boolean;
    }>('/v3/maintenance/status', {});
    return {
      version: res.version ?? '',
      memberId: res.header?.member_id ?? '0',
      clusterId: res.header?.cluster_id ?? '0',
      leader: res.leader ?? '0',
      revision: int(res.header?.revision),
      raftTerm: int(res.raftTerm),
      raftIndex: int(res.raftIndex),
      dbSize: int(res.dbSize),
      isLearner: res.isLearner === true,
    };
  }

  close(): void {
    for (const w of this.watches) w.abort();
    this.watches.clear();
    this.gateway.close();
  }
}

/** Calls `onLine` for each complete line of the response, until it ends. */
async function readLines(res: IncomingMessage, onLine: (line: string) => void): Promise<void> {
  let rest = '';
  for await (const chunk of res) {
    rest += (chunk as Buffer).toString('utf8');
    for (let nl = rest.indexOf('\n'); nl >= 0; nl = rest.indexOf('\n')) {
      const line = rest.slice(0, nl).trim();
      rest = rest.slice(nl + 1);
      if (line) onLine(line);
    }
  }
  if (rest.trim()) onLine(rest.trim());
}
