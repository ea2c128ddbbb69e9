import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { EtcdStore } from '../../../src/engine/swarm/store/etcd-store.js';
import { engineLogsOnFailure, NsEngine, TestNetwork } from '../../helpers/swarm-netns.js';

/**
 * A manager and a worker on two "hosts" (network namespaces on one switch bridge), each engine
 * with its own hostname: addresses found on their own interfaces, the join over the switch, the
 * etcd member's ports from the worker's side, and a worker cut off and back.
 */
describe('swarm across hosts in network namespaces', () => {
  let net: TestNetwork;
  let m: NsEngine;
  let w: NsEngine;
  let m2: NsEngine;

  engineLogsOnFailure(() => [m, w, m2].filter((x) => x !== undefined));
  before(async () => {
    net = await TestNetwork.create(3);
    [m, w, m2] = await Promise.all([
      NsEngine.start(net.hosts[0] ?? '', 'host1'),
      NsEngine.start(net.hosts[1] ?? '', 'host2'),
      NsEngine.start(net.hosts[2] ?? '', 'host3'),
    ]);
  });
  after(async () => {
    await Promise.all([w?.destroy(), m2?.destroy()]);
    await m?.destroy();
    await net?.destroy();
  });

  it('inits and joins with the addresses each host finds on its own interfaces', async () => {
    const init = await m.dockerOk(['swarm', 'init', '--dispatcher-heartbeat', '1s']);
    const token = /--token (\S+) (\S+)/.exec(init);
    assert.equal(token?.[2], `${net.address(1)}:2377`, init);
    assert.equal(
      await w.dockerOk(['swarm', 'join', '--token', token?.[1] ?? '', token?.[2] ?? '']),
      'This node joined a swarm as a worker.',
    );
    assert.equal(await w.dockerOk(['info', '--format', '{{.Swarm.NodeAddr}}']), net.address(2));
    const nodes = await m.dockerOk([
      'node',
      'ls',
      '--format',
      '{{.Hostname}} {{.Status}} {{.ManagerStatus}}',
    ]);
    assert.deepEqual(
      nodes
        .split('\n')
        .map((l) => l.trim())
        .sort(),
      ['host1 Ready Leader', 'host2 Ready'],
    );
  });

  it("keeps etcd's client port closed and its peer port to etcd peer certificates only", async () => {
    const closed = await net.exec(2, ['bash', '-c', `exec 3<>/dev/tcp/${net.address(1)}/2379`]);
    assert.notEqual(closed.code, 0, 'no etcd client port on the network');
    const peer = `https://${net.address(1)}:2380/members`;
    const anonymous = await net.exec(2, ['curl', '-sk', '--max-time', '5', peer]);
    assert.notEqual(anonymous.code, 0, 'the peer port wants a client certificate');
    const certs = join(w.dataRoot, 'swarm', 'certs');
    const asWorker = await net.exec(2, [
      'curl',
      '-sk',
      '--max-time',
      '5',
      '--cert',
      join(certs, 'swarm-node.crt'),
      '--key',
      join(certs, 'swarm-node.key'),
      peer,
    ]);
    assert.ok(
      asWorker.code !== 0 || !asWorker.stdout.includes('peerURLs'),
      `a worker certificate got in: ${asWorker.stdout}`,
    );
  });

  it('shows a worker cut off as down within 3 heartbeats + 1 s, and ready once it is back', async () => {
    await net.link(2, 'down');
    const cut = Date.now();
    let state = '';
    while (Date.now() - cut < 8000 && state !== 'down') {
      state = await m.dockerOk(['node', 'inspect', 'host2', '--format', '{{.Status.State}}']);
      if (state !== 'down') await new Promise((r) => setTimeout(r, 100));
    }
    const downAfter = Date.now() - cut;
    assert.equal(state, 'down');
    // 3 × 1 s + 1 s, and 1 s of slack for a loaded machine (the CLI polls in between)
    assert.ok(downAfter <= 5000, `down after ${downAfter} ms`);
    await net.link(2, 'up');
    const back = Date.now();
    while (Date.now() - back < 10_000 && state !== 'ready') {
      state = await m.dockerOk(['node', 'inspect', 'host2', '--format', '{{.Status.State}}']);
      if (state !== 'ready') await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(state, 'ready');
  });

  it('adds a manager: a learner member promoted, the cluster state shared, quorum kept on leave', async () => {
    const token = await m.dockerOk(['swarm', 'join-token', '-q', 'manager']);
    assert.equal(
      await m2.dockerOk(['swarm', 'join', '--token', token, `${net.address(1)}:2377`]),
      'This node joined a swarm as a manager.',
    );
    const store = new EtcdStore({ socketPath: join(m.dir, 'exec', 'swarm', 'etcd.sock:0') });
    try {
      const members = await store.memberList();
      assert.equal(members.length, 2);
      assert.ok(
        members.every((x) => !x.isLearner),
        JSON.stringify(members),
      );
      for (const e of [m, m2]) {
        const rows = await e.dockerOk(['node', 'ls', '--format', '{{.Hostname}} {{.ManagerStatus}}']);
        assert.deepEqual(
          rows
            .split('\n')
            .map((l) => l.trim())
            .sort(),
          ['host1 Leader', 'host2', 'host3 Reachable'],
        );
      }
      // a write through one manager is read through the other
      await m2.dockerOk(['swarm', 'update', '--task-history-limit', '9']);
      assert.equal(
        await m.dockerOk([
          'info',
          '--format',
          '{{.Swarm.Cluster.Spec.Orchestration.TaskHistoryRetentionLimit}}',
        ]),
        '9',
      );
      assert.equal(await m.dockerOk(['info', '--format', '{{.Swarm.Managers}} {{.Swarm.Nodes}}']), '2 3');
      const leave = await m2.docker(['swarm', 'leave']);
      assert.match(
        leave.stderr,
        /Removing this node leaves 1 managers out of 2\. Without a Raft quorum your swarm will be inaccessible\./,
      );
      assert.equal(await m2.dockerOk(['swarm', 'leave', '--force']), 'Node left the swarm.');
      assert.equal((await store.memberList()).length, 1);
      assert.equal(await m.dockerOk(['info', '--format', '{{.Swarm.Managers}}']), '1');
    } finally {
      store.close();
    }
  });
});
