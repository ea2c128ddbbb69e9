import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { copyFile, mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { EtcdStore } from '../../../src/engine/swarm/store/etcd-store.js';
import { runCommand } from '../../helpers/process.js';
import { SwarmHosts } from '../../helpers/swarm-hosts.js';
import { engineLogsOnFailure, type NsEngine, type TestNetwork } from '../../helpers/swarm-netns.js';

/**
 * Promote and demote across three hosts (network namespaces on one switch): a worker promoted
 * gets a manager certificate and a voting etcd member and serves `docker node ls`; a demotion
 * that would lose the quorum, and the last manager's, are refused as swarmkit refuses them; a
 * demoted manager's member leaves etcd and the node goes on as a worker.
 */

/** Until `ok` holds for what `fn` gives; an error (a manager between leaders) counts as "not yet". */
async function until<T>(what: string, fn: () => Promise<T>, ok: (v: T) => boolean, ms = 10_000): Promise<T> {
  const start = Date.now();
  for (;;) {
    let last: unknown;
    try {
      const v = await fn();
      if (ok(v)) return v;
      last = v;
    } catch (err) {
      last = String(err);
    }
    if (Date.now() - start > ms) assert.fail(`${what}: still ${JSON.stringify(last)} after ${ms} ms`);
    await sleep(200);
  }
}

async function ouOf(e: NsEngine): Promise<string> {
  const pem = await readFile(join(e.dataRoot, 'swarm', 'certs', 'swarm-node.crt'), 'utf8');
  return /OU=([^\n]+)/.exec(new X509Certificate(pem).subject)?.[1] ?? '';
}

describe('swarm node promote and demote (three hosts)', () => {
  let hosts: SwarmHosts;
  let net: TestNetwork;
  let m: NsEngine;
  let h2: NsEngine;
  let h3: NsEngine;
  let store: EtcdStore;

  // the leader may move (a member cut off comes back with a higher term): a leader is reachable
  const rows = async (e: NsEngine) =>
    (await e.dockerOk(['node', 'ls', '--format', '{{.Hostname}} {{.ManagerStatus}}']))
      .split('\n')
      .map((l) => l.trim().replace(/ Leader$/, ' Reachable'))
      .sort()
      .join(', ');
  const voters = async () => (await store.memberList()).filter((x) => !x.isLearner).length;

  engineLogsOnFailure(() => hosts?.engines);
  before(async () => {
    hosts = await SwarmHosts.start(['manager', 'worker', 'worker'], { busybox: 'none', store: true });
    [m, h2, h3] = hosts.engines as [NsEngine, NsEngine, NsEngine];
    net = hosts.net;
    store = hosts.store as EtcdStore;
  });
  after(async () => {
    await hosts?.destroy();
  });

  it('promotes workers: a manager certificate, a voting member, the manager API, within 10 s', async () => {
    // an autolocked swarm: the promoted manager's keys go to its disk sealed too
    await m.dockerOk(['swarm', 'update', '--autolock=true']);
    assert.equal(
      await m.dockerOk(['node', 'promote', 'host2']),
      'Node host2 promoted to a manager in the swarm.',
    );
    await until(
      'node ls after promote',
      () => rows(m),
      (r) => r === 'host1 Reachable, host2 Reachable, host3',
    );
    assert.equal(await voters(), 2);
    assert.match(await m.dockerOk(['node', 'ls', '--format', '{{.ManagerStatus}}']), /^Leader$/m);
    assert.equal(await ouOf(h2), 'swarm-manager');
    assert.equal(await rows(h2), 'host1 Reachable, host2 Reachable, host3');
    assert.equal(
      await h2.dockerOk(['info', '--format', '{{.Swarm.ControlAvailable}} {{.Swarm.Managers}}']),
      'true 2',
    );
    const state = JSON.parse(await readFile(join(h2.dataRoot, 'swarm', 'state.json'), 'utf8'));
    assert.equal(state.Autolock, true);
    const key = await readFile(join(h2.dataRoot, 'swarm', 'certs', 'swarm-node.key'), 'utf8');
    assert.ok(!key.includes('PRIVATE KEY'), 'the key is sealed on disk');
    // restarted, the promoted manager is locked until its unlock key comes (its member waits)
    const unlockKey = await m.dockerOk(['swarm', 'unlock-key', '-q']);
    await h2.stop();
    await h2.launch();
    assert.equal(await h2.dockerOk(['info', '--format', '{{.Swarm.LocalNodeState}}']), 'locked');
    const unlocked = await runCommand('docker', ['-H', `unix://${h2.socket}`, 'swarm', 'unlock'], {
      input: `${unlockKey}\n`,
      env: { DOCKER_CONFIG: join(h2.dir, 'docker-config'), DOCKER_HOST: '' },
    });
    assert.equal(unlocked.code, 0, unlocked.stderr);
    await until(
      'host2 back as a manager',
      () => rows(h2).catch(String),
      (r) => r === 'host1 Reachable, host2 Reachable, host3',
      20_000,
    );
    await m.dockerOk(['node', 'update', '--role', 'manager', 'host3']);
    await until(
      'node ls after update --role',
      () => rows(h2),
      (r) => r === 'host1 Reachable, host2 Reachable, host3 Reachable',
    );
    assert.equal(await voters(), 3);
  });

  it('refuses a demotion that would lose the quorum, and the last manager', async () => {
    await net.link(3, 'down');
    try {
      await until(
        'host3 down',
        () => m.dockerOk(['node', 'inspect', 'host3', '--format', '{{.Status.State}}']),
        (s) => s === 'down',
      );
      const r = await m.docker(['node', 'demote', 'host2']);
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /can't remove member from the raft: this would result in a loss of quorum/);
      assert.equal(await voters(), 3);
    } finally {
      await net.link(3, 'up');
    }
    await until(
      'host3 back',
      () => rows(m),
      (r) => r === 'host1 Reachable, host2 Reachable, host3 Reachable',
      20_000,
    );
  });

  it('demotes managers: the member leaves etcd first, the node goes on as a worker', async () => {
    assert.equal(await m.dockerOk(['node', 'demote', 'host2']), 'Manager host2 demoted in the swarm.');
    assert.equal(await voters(), 2, 'the member is gone when the demotion answers');
    await until(
      'node ls after demote',
      () => rows(m),
      (r) => r === 'host1 Reachable, host2, host3 Reachable',
    );
    await until(
      'host2 a worker',
      () => h2.dockerOk(['info', '--format', '{{.Swarm.ControlAvailable}}']),
      (s) => s === 'false',
    );
    const ls = await h2.docker(['node', 'ls']);
    assert.match(ls.stderr, /Worker nodes can't be used to view or modify cluster state/);
    await until(
      'a worker certificate',
      () => ouOf(h2),
      (ou) => ou === 'swarm-worker',
    );
    await until(
      'host2 ready as a worker',
      () => m.dockerOk(['node', 'inspect', 'host2', '--format', '{{.Status.State}} {{.Spec.Role}}']),
      (s) => s === 'ready worker',
    );
    // one of two managers: the other member keeps running until it is out of etcd
    assert.equal(await m.dockerOk(['node', 'demote', 'host3']), 'Manager host3 demoted in the swarm.');
    await until(
      'host3 a worker',
      () => rows(m),
      (r) => r === 'host1 Reachable, host2, host3',
    );
    assert.equal(await voters(), 1);
    await m.dockerOk(['node', 'promote', 'host3']);
    await until(
      'host3 a manager again',
      () => rows(m),
      (r) => r === 'host1 Reachable, host2, host3 Reachable',
      20_000,
    );
    // host3's own manager API answers once its member votes (a moment after the others list it;
    // over 10 s once in CI with another swarm test beside it: its member restarts and catches up)
    await until(
      'host3 serving the manager API',
      async () => {
        const r = await h3.docker(['node', 'ls', '-q']);
        return r.code === 0 ? 'ok' : r.stderr.trim();
      },
      (out) => out === 'ok',
      30_000,
    );
    // the demoting manager may be the demoted one
    assert.equal(await h3.dockerOk(['node', 'demote', 'host3']), 'Manager host3 demoted in the swarm.');
    await until(
      'host3 a worker again',
      () => rows(m),
      (r) => r === 'host1 Reachable, host2, host3',
    );
    assert.equal(await voters(), 1);
    const last = await m.docker(['node', 'demote', 'host1']);
    assert.match(last.stderr, /attempting to demote the last manager of the swarm/);
  });

  it("refuses a removed node's certificate, for heartbeats and renewals", async () => {
    const certs = join(h2.dataRoot, 'swarm', 'certs');
    const kept = join(m.dir, 'removed-node');
    await mkdir(kept);
    for (const f of ['swarm-node.crt', 'swarm-node.key']) await copyFile(join(certs, f), join(kept, f));
    const status = async (path: string) =>
      (
        await net.exec(2, [
          'curl',
          '-sk',
          '--max-time',
          '5',
          '-o',
          '/dev/null',
          '-w',
          '%{http_code}',
          '--cert',
          join(kept, 'swarm-node.crt'),
          '--key',
          join(kept, 'swarm-node.key'),
          '-X',
          'POST',
          '-d',
          '{"CSR":"x"}',
          `https://${net.address(1)}:2377${path}`,
        ])
      ).stdout;
    assert.equal(await status('/v1/renew'), '400', 'a member with a bad CSR');
    assert.equal(await h2.dockerOk(['swarm', 'leave']), 'Node left the swarm.');
    await until(
      'host2 down',
      () => m.dockerOk(['node', 'inspect', 'host2', '--format', '{{.Status.State}}']),
      (s) => s === 'down',
    );
    await m.dockerOk(['node', 'rm', 'host2']);
    assert.equal(await status('/v1/renew'), '403');
    assert.equal(await status('/v1/heartbeat'), '403');
  });
});
