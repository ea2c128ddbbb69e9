import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { BUSYBOX_CHANGES, busyboxTarball } from '../../helpers/busybox.js';
import { engineLogsOnFailure, NsEngine, TestNetwork } from '../../helpers/swarm-netns.js';

/**
 * Three managers on three hosts (network namespaces on one switch), heartbeats every second.
 * A root CA rotation across them keeps etcd's quorum (peer certificates reissued from the new
 * root, chained to the old) and a member restarted afterwards, trusting only the new root, is
 * back in the cluster. Then two managers die (engine and etcd member, kill -9): the third
 * answers dockerd's lost-quorum 503, and `docker swarm init --force-new-cluster` there brings
 * the swarm back with its services, secrets and configs, one manager, the tasks moved to it. A
 * lost manager comes back only after it leaves.
 */

const NO_LEADER =
  "The swarm does not have a leader. It's possible that too few managers are online. Make sure more than half of the managers are online.";

describe('swarm managers: root rotation, lost quorum and --force-new-cluster (three hosts)', () => {
  let net: TestNetwork;
  let engines: NsEngine[] = [];
  const ids: string[] = [];

  async function until(what: string, ms: number, check: () => Promise<boolean>): Promise<void> {
    const start = Date.now();
    while (Date.now() - start < ms) {
      if (await check().catch(() => false)) return;
      await sleep(200);
    }
    assert.fail(`${what}: not within ${ms} ms`);
  }

  const memberPid = async (e: NsEngine) =>
    Number((await readFile(join(e.dir, 'exec', 'swarm', 'etcd.pid'), 'utf8')).trim());

  engineLogsOnFailure(() => engines);
  before(async () => {
    net = await TestNetwork.create(3, '192.168.207');
    engines = await Promise.all([1, 2, 3].map((i) => NsEngine.start(net.hosts[i - 1] ?? '', `host${i}`)));
    const tar = await busyboxTarball();
    await Promise.all(engines.map((e) => e.dockerOk(['import', ...BUSYBOX_CHANGES, tar, 'busybox:latest'])));
    const [m1, m2, m3] = engines as [NsEngine, NsEngine, NsEngine];
    await m1.dockerOk(['swarm', 'init', '--dispatcher-heartbeat', '1s']);
    const token = await m1.dockerOk(['swarm', 'join-token', '-q', 'manager']);
    for (const m of [m2, m3]) await m.dockerOk(['swarm', 'join', '--token', token, `${net.address(1)}:2377`]);
    for (const e of engines) ids.push(await e.dockerOk(['info', '--format', '{{.Swarm.NodeID}}']));
  });
  after(async () => {
    for (const e of engines) {
      // a member left by an engine killed here is ended by its pid
      const pid = await memberPid(e).catch(() => 0);
      await e.destroy().catch(() => undefined);
      if (pid > 0) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {}
      }
    }
    await net?.destroy();
  });

  it('rotates the root across three managers; a member restarted afterwards rejoins', async () => {
    const [m1, m2, m3] = engines as [NsEngine, NsEngine, NsEngine];
    // writes through another manager go on while the members' peer certificates change
    let rotating = true;
    const failed: string[] = [];
    let writes = 0;
    const writer = (async () => {
      for (let i = 0; rotating; i++) {
        // (not a node update: the renewals change the nodes' versions meanwhile, as swarmkit's do)
        const w = await m2.docker(['config', 'create', `during-${i}`, '/etc/hostname']);
        if (w.code !== 0) failed.push(w.stderr.trim());
        else writes++;
      }
    })();
    const r = await m1.docker(['swarm', 'ca', '--rotate']);
    rotating = false;
    await writer;
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(failed, []);
    assert.ok(writes > 0);
    const root = await m2.dockerOk(['swarm', 'ca']);
    assert.ok(r.stdout.trimEnd().endsWith(root));
    assert.equal(
      await m3.dockerOk(['info', '--format', '{{.Swarm.Cluster.RootRotationInProgress}}']),
      'false',
    );
    // m3's member restarts with the new root alone as its peers' trust
    await m3.stop();
    await m3.launch();
    await until('m3 serves again after its restart', 30_000, async () => {
      await m3.dockerOk(['node', 'update', '--label-add', 'after=rotation', ids[2] ?? '']);
      return true;
    });
    await until('every manager reachable', 20_000, async () => {
      const ls = await m1.dockerOk(['node', 'ls', '--format', '{{.ManagerStatus}}']);
      return ls.split('\n').filter((l) => /Leader|Reachable/.test(l)).length === 3;
    });
  });

  it('answers 503 without quorum, and --force-new-cluster brings back every object', async () => {
    const [m1, m2, m3] = engines as [NsEngine, NsEngine, NsEngine];
    await m1.dockerOk(['secret', 'create', 's1', '/etc/hostname']);
    await m1.dockerOk(['config', 'create', 'c1', '/etc/hostname']);
    await m1.dockerOk([
      'service',
      'create',
      '--detach',
      '--name',
      'web',
      '--replicas',
      '3',
      'busybox',
      'sleep',
      '1000',
    ]);
    await until('three tasks running', 60_000, async () => {
      const ps = await m1.dockerOk(['service', 'ps', 'web', '--format', '{{.CurrentState}}']);
      return ps.split('\n').filter((l) => l.startsWith('Running')).length === 3;
    });
    // m2 and m3 die whole: engine and etcd member, by pid
    for (const m of [m2, m3]) {
      const pid = await memberPid(m);
      await m.kill();
      process.kill(pid, 'SIGKILL');
    }
    await until('the lost-quorum answer', 40_000, async () => {
      const r = await m1.docker(['node', 'ls']);
      return r.code !== 0 && r.stderr.includes(NO_LEADER);
    });
    // answered at once, as dockerd does, not after a request timeout
    for (const args of [
      ['node', 'ls'],
      ['service', 'ls'],
      ['secret', 'ls'],
    ]) {
      const t = Date.now();
      const r = await m1.docker(args);
      assert.ok(r.code !== 0 && r.stderr.includes(NO_LEADER), r.stderr);
      assert.ok(Date.now() - t < 5000, `${args.join(' ')} took ${Date.now() - t} ms`);
    }
    assert.equal(await m1.dockerOk(['info', '--format', '{{.Swarm.Error}}']), NO_LEADER);
    const t0 = Date.now();
    await m1.dockerOk(['swarm', 'init', '--force-new-cluster']);
    const restoredMs = Date.now() - t0;
    assert.equal(await m1.dockerOk(['secret', 'ls', '--format', '{{.Name}}']), 's1');
    assert.equal(await m1.dockerOk(['config', 'ls', '--filter', 'name=c1', '--format', '{{.Name}}']), 'c1');
    assert.equal(await m1.dockerOk(['service', 'ls', '--format', '{{.Name}} {{.Mode}}']), 'web replicated');
    assert.equal(await m1.dockerOk(['info', '--format', '{{.Swarm.Managers}}']), '1');
    // the lost managers' nodes turn down; their tasks come to m1
    await until('the tasks on m1', 60_000, async () => {
      const ps = await m1.dockerOk([
        'service',
        'ps',
        'web',
        '--filter',
        'desired-state=running',
        '--format',
        '{{.Node}} {{.CurrentState}}',
      ]);
      const lines = ps.split('\n');
      return lines.length === 3 && lines.every((l) => l.startsWith('host1 Running'));
    });
    for (const id of ids.slice(1)) {
      assert.equal(await m1.dockerOk(['node', 'inspect', id, '--format', '{{.Status.State}}']), 'down');
    }
    // a write works
    await m1.dockerOk(['service', 'scale', '--detach', 'web=1']);
    assert.ok(restoredMs < 30_000, `force-new-cluster took ${restoredMs} ms`);
  });

  it('lets a lost manager back only after it leaves', async () => {
    const [m1, m2] = engines as [NsEngine, NsEngine, NsEngine];
    await m2.launch();
    // its member is no longer in the cluster: it serves nothing as a manager
    const ls = await m2.docker(['node', 'ls']);
    assert.notEqual(ls.code, 0);
    await m2.dockerOk(['swarm', 'leave', '--force']);
    assert.equal(await m2.dockerOk(['info', '--format', '{{.Swarm.LocalNodeState}}']), 'inactive');
    const token = await m1.dockerOk(['swarm', 'join-token', '-q', 'manager']);
    assert.equal(
      await m2.dockerOk(['swarm', 'join', '--token', token, `${net.address(1)}:2377`]),
      'This node joined a swarm as a manager.',
    );
    assert.equal(await m1.dockerOk(['info', '--format', '{{.Swarm.Managers}}']), '2');
  });
});
