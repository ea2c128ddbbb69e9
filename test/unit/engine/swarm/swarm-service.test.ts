import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { Logger } from '../../../../src/common/log.js';
import type { EtcdMemberSpec } from '../../../../src/engine/swarm/etcd/etcd-args.js';
import { keys } from '../../../../src/engine/swarm/keys.js';
import type { MemberRunner } from '../../../../src/engine/swarm/options.js';
import { MemoryStore } from '../../../../src/engine/swarm/store/memory-store.js';
import { SwarmService } from '../../../../src/engine/swarm/swarm.service.js';

class FakeMember implements MemberRunner {
  readonly socketPath = '/nowhere/etcd.sock:0';
  started: EtcdMemberSpec[] = [];
  stops = 0;
  async start(spec: EtcdMemberSpec): Promise<void> {
    this.started.push(spec);
  }
  async stop(): Promise<void> {
    this.stops++;
  }
}

const noFlags = { rotateWorkerToken: false, rotateManagerToken: false, rotateManagerUnlockKey: false };

describe('SwarmService (in-memory store, fake member)', () => {
  let dir: string;
  let now: number;
  let store: MemoryStore;
  let member: FakeMember;
  let swarm: SwarmService;

  const make = () =>
    new SwarmService({
      dataRoot: dir,
      engineVersion: '0.1.0',
      peerPort: 2380,
      member,
      openStore: () => store,
      interfaces: { list: async () => [] },
      describeHost: () => ({ hostname: 'h1', nanoCpus: 2e9, memoryBytes: 1 << 30 }),
      plugins: () => [{ Type: 'Volume', Name: 'local' }],
      log: new Logger('error'),
      now: () => new Date(now),
    });

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-swarm-unit-'));
    now = Date.parse('2026-11-28T00:00:00Z');
    store = new MemoryStore(() => now);
    member = new FakeMember();
    swarm = make();
  });
  afterEach(async () => {
    await swarm.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** Demote a node to worker at its current version. */
  const demote = async (id: string) =>
    swarm.updateNode(id, (await swarm.inspectNode(id)).Version.Index, {
      Role: 'worker',
      Availability: 'active',
    });

  /** Another manager beside `self`: its etcd member, node and manager records, and its liveness key
   * when alive. Returns its member id. */
  const addManager = async (self: string, id: string, host: string, alive: boolean) => {
    const base = JSON.parse((await store.get(keys.node(self)))?.value ?? '{}');
    const { member: m } = await store.memberAdd([`https://${host}:2380`], false);
    await store.put(
      keys.node(id),
      JSON.stringify({ ...base, ID: id, Description: { ...base.Description, Hostname: id } }),
    );
    await store.put(keys.manager(id), JSON.stringify({ memberId: m.id, peerUrl: '', addr: `${host}:2377` }));
    if (alive) await store.put(keys.live(id), host);
    return m.id;
  };

  it('answers as dockerd outside a swarm', async () => {
    assert.equal(swarm.pingState(), 'inactive');
    await assert.rejects(swarm.inspect(), { kind: 'Unavailable', message: /not a swarm manager/ });
    await assert.rejects(swarm.leave(true), {
      kind: 'Unavailable',
      message: 'This node is not part of a swarm',
    });
    await assert.rejects(swarm.join({ RemoteAddrs: [] }), {
      kind: 'InvalidParameter',
      message: 'at least 1 RemoteAddr is required to join',
    });
    assert.equal((await swarm.info()).LocalNodeState, 'inactive');
  });

  it('inits a one-member cluster: member flags, keys in the store, state on disk', async () => {
    const id = await swarm.initSwarm({
      AdvertiseAddr: '10.0.0.5',
      ListenAddr: '0.0.0.0:4000',
      Spec: { Raft: { HeartbeatTick: 2, ElectionTick: 20 } },
    });
    assert.equal(swarm.pingState(), 'active/manager');
    const spec = member.started[0];
    assert.equal(spec?.name, id);
    assert.equal(spec?.peerUrl, 'https://10.0.0.5:2380');
    assert.equal(spec?.clusterState, 'new');
    assert.equal(spec?.raft.HeartbeatTick, 2);
    assert.equal(spec?.raft.ElectionTick, 20);
    for (const key of [keys.cluster, keys.caRoot, keys.node(id), keys.manager(id), keys.live(id)]) {
      assert.ok(await store.get(key), key);
    }
    // the root key is sealed: no PEM key in the store
    assert.doesNotMatch((await store.get(keys.caRoot))?.value ?? '', /PRIVATE KEY/);
    const state = JSON.parse(await readFile(join(dir, 'swarm', 'state.json'), 'utf8'));
    assert.equal(state.NodeID, id);
    const info = await swarm.info();
    assert.deepEqual(info.RemoteManagers, [{ NodeID: id, Addr: '10.0.0.5:4000' }]);
    assert.equal(info.Nodes, 1);
    assert.equal(info.Cluster?.Spec.Raft.ElectionTick, 20);
    const nodes = await swarm.listNodes();
    assert.equal(nodes[0]?.Status.State, 'ready');
    assert.equal(nodes[0]?.ManagerStatus?.Leader, true);
    assert.equal((await swarm.inspectNode('h1')).ID, id);
    assert.equal((await swarm.inspectNode(id.slice(0, 5))).ID, id);
    await assert.rejects(swarm.inspectNode('nope'), { kind: 'NotFound', message: 'node nope not found' });
  });

  it('shows the node down once its liveness lease expires', async () => {
    await swarm.initSwarm({ AdvertiseAddr: '10.0.0.5' });
    now += 14_000;
    assert.equal((await swarm.listNodes())[0]?.Status.State, 'ready');
    now += 2_000;
    const [node] = await swarm.listNodes();
    assert.equal(node?.Status.State, 'down');
    assert.equal(node?.ManagerStatus?.Reachability, 'unreachable');
  });

  it('updates by version: a stale version is 409 and changes nothing', async () => {
    await swarm.initSwarm({ AdvertiseAddr: '10.0.0.5' });
    const s = await swarm.inspect();
    await swarm.update(s.Version.Index, { Orchestration: { TaskHistoryRetentionLimit: 9 } }, noFlags);
    const s2 = await swarm.inspect();
    assert.equal(s2.Spec.Orchestration.TaskHistoryRetentionLimit, 9);
    assert.ok(s2.Version.Index > s.Version.Index);
    await assert.rejects(
      swarm.update(s.Version.Index, { Orchestration: { TaskHistoryRetentionLimit: 1 } }, noFlags),
      {
        kind: 'Conflict',
        message: 'update out of sequence',
      },
    );
    assert.equal((await swarm.inspect()).Spec.Orchestration.TaskHistoryRetentionLimit, 9);
    // the Raft settings are kept for the member's next start
    await swarm.update(s2.Version.Index, { Raft: { SnapshotInterval: 777 } }, noFlags);
    const state = JSON.parse(await readFile(join(dir, 'swarm', 'state.json'), 'utf8'));
    assert.equal(state.Raft.SnapshotInterval, 777);
  });

  it('rotates tokens and the unlock key as asked, and seals the key', async () => {
    await swarm.initSwarm({ AdvertiseAddr: '10.0.0.5', AutoLockManagers: true });
    const s = await swarm.inspect();
    const key = (await swarm.unlockKey()).UnlockKey;
    assert.match(key, /^SWMKEY-1-/);
    assert.ok(!(await store.get(keys.cluster))?.value.includes(key), 'the unlock key is sealed in the store');
    await swarm.update(
      s.Version.Index,
      { EncryptionConfig: { AutoLockManagers: true } },
      {
        ...noFlags,
        rotateWorkerToken: true,
        rotateManagerUnlockKey: true,
      },
    );
    const s2 = await swarm.inspect();
    assert.notEqual(s2.JoinTokens.Worker, s.JoinTokens.Worker);
    assert.equal(s2.JoinTokens.Manager, s.JoinTokens.Manager);
    const key2 = (await swarm.unlockKey()).UnlockKey;
    assert.notEqual(key2, key);
    await swarm.update(s2.Version.Index, {}, noFlags);
    assert.equal((await swarm.unlockKey()).UnlockKey, '');
    await assert.rejects(swarm.unlock(key2), { kind: 'Conflict', message: 'swarm is not locked' });
  });

  it('answers 503 without a leader when the store cannot answer', async () => {
    await swarm.initSwarm({ AdvertiseAddr: '10.0.0.5' });
    store.failWith = new Error('etcdserver: request timed out');
    await assert.rejects(swarm.inspect(), { kind: 'Unavailable', message: /does not have a leader/ });
    assert.match((await swarm.info()).Error, /timed out/);
  });

  it('leaves: not without force on the last manager; with force everything goes', async () => {
    await swarm.initSwarm({ AdvertiseAddr: '10.0.0.5' });
    await assert.rejects(swarm.leave(false), {
      kind: 'Unavailable',
      message: /Removing the last manager erases/,
    });
    await swarm.leave(true);
    assert.equal(swarm.pingState(), 'inactive');
    assert.equal(member.stops, 1);
    assert.equal(existsSync(join(dir, 'swarm')), false);
  });

  it("refuses to leave when the rest would lose quorum, in dockerd's words", async () => {
    await swarm.initSwarm({ AdvertiseAddr: '10.0.0.5' });
    await store.memberAdd(['https://10.0.0.6:2380'], false);
    await assert.rejects(swarm.leave(false), {
      kind: 'Unavailable',
      message:
        /Removing this node leaves 1 managers out of 2\. Without a Raft quorum your swarm will be inaccessible\./,
    });
    await store.memberAdd(['https://10.0.0.7:2380'], false);
    await swarm.leave(false);
    assert.equal((await store.memberList()).length, 2, 'this member left the etcd cluster');
  });

  it('demotes as swarmkit: never the last manager, never below quorum, the member removed first', async () => {
    const self = await swarm.initSwarm({ AdvertiseAddr: '10.0.0.5' });
    await assert.rejects(demote(self), {
      kind: 'InvalidParameter',
      message: 'attempting to demote the last manager of the swarm',
    });
    // two more managers, one of them down (no liveness key)
    const m2 = await addManager(self, 'm2', '10.0.0.6', true);
    await addManager(self, 'm3', '10.0.0.7', false);
    await assert.rejects(demote('m2'), {
      kind: 'InvalidParameter',
      message: "can't remove member from the raft: this would result in a loss of quorum",
    });
    assert.equal((await store.memberList()).length, 3);
    assert.equal((await swarm.inspectNode('m2')).Spec.Role, 'manager', 'a refusal changes nothing');
    await store.put(keys.live('m3'), '10.0.0.7');
    await demote('m2');
    assert.ok(!(await store.memberList()).some((m) => m.id === m2), 'its member is gone');
    const node = await swarm.inspectNode('m2');
    assert.equal(node.Spec.Role, 'worker');
    assert.equal(node.ManagerStatus, undefined);
    assert.equal((await swarm.info()).Managers, 2);
  });

  it("demotes itself when its own member's removal answers 'server stopped' (etcd stopped it once applied)", async () => {
    const self = await swarm.initSwarm({ AdvertiseAddr: '10.0.0.5' });
    await addManager(self, 'm2', '10.0.0.6', true);
    await addManager(self, 'm3', '10.0.0.7', true);
    const own = JSON.parse((await store.get(keys.manager(self)))?.value ?? '{}').memberId as string;
    // etcd applies a removal, then the member it removed stops before it answers
    const remove = store.memberRemove.bind(store);
    store.memberRemove = async (id: string) => {
      await remove(id);
      throw new Error('etcdserver: server stopped');
    };
    await assert.rejects(demote('m2'), /server stopped/, "another node's member: the error stands");
    await demote(self);
    assert.ok(!(await store.memberList()).some((m) => m.id === own), 'its own member is gone');
    const node = await swarm.inspectNode(self);
    assert.equal(node.Spec.Role, 'worker');
    assert.equal(node.ManagerStatus, undefined);
  });

  it('takes its swarm up again at engine start', async () => {
    const id = await swarm.initSwarm({ AdvertiseAddr: '10.0.0.5' });
    await swarm.close();
    const again = make();
    swarm = again;
    await again.start();
    assert.equal(again.pingState(), 'active/manager');
    assert.equal((await again.info()).NodeID, id);
    assert.equal(member.started.length, 2);
  });
});
