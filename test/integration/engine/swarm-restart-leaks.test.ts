import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { networkKeys } from '../../../src/engine/swarm/networks/network-keys.js';
import { EtcdStore } from '../../../src/engine/swarm/store/etcd-store.js';
import { BUSYBOX_CHANGES, busyboxTarball } from '../../helpers/busybox.js';
import { until } from '../../helpers/eventually.js';
import { engineLogsOnFailure, NsEngine, TestNetwork } from '../../helpers/swarm-netns.js';
import { overlayNamespaces } from '../../helpers/swarm-overlay.js';

/**
 * Nothing leaks across an engine's kill -9 (issue 14 §9): a worker runs a VIP service on one
 * overlay network and a service on another with an ingress-published port; its engine is killed
 * with SIGKILL, the second service is removed meanwhile, and the engine started again. Afterwards
 * the worker's host holds what it held before that service existed (links, veths, VXLAN devices,
 * overlay namespaces, nft tables, iptables rules, mounts), every overlay namespace's FDB and
 * neighbour entries name only live tasks, the cluster's address claims are those of before, and
 * the VIP service still answers through its VIP.
 */
describe('swarm data plane after an engine kill -9', () => {
  let net: TestNetwork;
  let engines: NsEngine[] = [];

  engineLogsOnFailure(() => engines);
  before(async () => {
    net = await TestNetwork.create(2);
    engines = await Promise.all([1, 2].map((i) => NsEngine.start(net.hosts[i - 1] ?? '', `lkhost${i}`)));
    const tar = await busyboxTarball();
    await Promise.all(engines.map((e) => e.dockerOk(['import', ...BUSYBOX_CHANGES, tar, 'busybox:latest'])));
    const [m, w] = engines as [NsEngine, NsEngine];
    // the default heartbeat (5 s; liveness 15 s): the worker stays up through its restart
    await m.dockerOk(['swarm', 'init']);
    const token = await m.dockerOk(['swarm', 'join-token', '-q', 'worker']);
    await w.dockerOk(['swarm', 'join', '--token', token, `${net.address(1)}:2377`]);
  });
  after(async () => {
    await engines[1]?.destroy();
    await engines[0]?.destroy();
    await net?.destroy();
  });

  async function sh(i: number, cmd: string[]): Promise<string> {
    const r = await net.exec(i, cmd);
    assert.equal(r.code, 0, `${cmd.join(' ')}: ${r.stderr}`);
    return r.stdout;
  }

  /** What host `i` holds of berth's data plane, names of per-task links left out (counted). */
  async function hostState(i: number) {
    const e = engines[i - 1] as NsEngine;
    const links = JSON.parse((await sh(i, ['ip', '-j', '-d', 'link'])) || '[]') as Array<{
      ifname: string;
      linkinfo?: { info_kind?: string };
    }>;
    const namespaces = await overlayNamespaces(e);
    const inside: string[] = [];
    for (const ns of namespaces) {
      const l = JSON.parse((await sh(i, ['ip', '-n', ns, '-j', '-d', 'link'])) || '[]') as typeof links;
      // a task's veth is named anew when the restarted engine plugs it again: its kind counts
      inside.push(
        `${ns}: ${l.map((x) => (x.linkinfo?.info_kind === 'veth' ? 'veth' : `${x.linkinfo?.info_kind ?? ''}:${x.ifname}`)).sort()}`,
      );
    }
    const veths = links.filter((l) => l.linkinfo?.info_kind === 'veth' && l.ifname !== 'eth0');
    // the rules, by table (a table iptables made for a rule stays, empty, as with dockerd)
    const iptables: string[] = [];
    let table = '';
    for (const l of (await sh(i, ['iptables-save'])).split('\n')) {
      if (l.startsWith('*')) table = l;
      else if (l.startsWith('-A ')) iptables.push(`${table} ${l}`);
    }
    const mounts = (await readFile('/proc/self/mountinfo', 'utf8'))
      .split('\n')
      .filter((l) => l.includes(e.dir));
    return {
      links: links
        .filter((l) => l.linkinfo?.info_kind !== 'veth' || l.ifname === 'eth0')
        .map((l) => `${l.linkinfo?.info_kind ?? ''}:${l.ifname}`)
        .sort(),
      veths: veths.length,
      namespaces,
      inside,
      // nft tables but iptables-nft's own
      nft: (await sh(i, ['nft', 'list', 'tables']))
        .split('\n')
        .filter((t) => t && !/^table ip (filter|nat|raw|mangle)$/.test(t))
        .sort(),
      iptables,
      mounts: mounts.length,
    };
  }

  /** Every FDB and neighbour entry of the overlay namespaces on host `i`: `<mac> <dst>`, `<ip> <mac>`. */
  async function peerEntries(i: number): Promise<string[]> {
    const out: string[] = [];
    for (const ns of await overlayNamespaces(engines[i - 1] as NsEngine)) {
      const dev = (await sh(i, ['ip', '-n', ns, '-o', 'link', 'show', 'type', 'vxlan'])).match(
        /: (vxlan\d+)[@:]/,
      )?.[1];
      if (!dev) continue;
      const fdb = JSON.parse(
        (await sh(i, ['bridge', '-n', ns, '-j', 'fdb', 'show', 'dev', dev])) || '[]',
      ) as Array<{
        mac: string;
        dst?: string;
      }>;
      for (const f of fdb) if (f.dst) out.push(`fdb ${f.mac} ${f.dst}`);
      const neigh = JSON.parse(
        (await sh(i, ['ip', '-n', ns, '-j', 'neigh', 'show', 'dev', dev])) || '[]',
      ) as Array<{
        dst: string;
        lladdr?: string;
      }>;
      for (const n of neigh) out.push(`neigh ${n.dst} ${n.lladdr ?? ''}`);
    }
    return out.sort();
  }

  async function claims(): Promise<string[]> {
    const store = new EtcdStore({
      socketPath: join((engines[0] as NsEngine).dir, 'exec', 'swarm', 'etcd.sock:0'),
    });
    try {
      const r = await store.range(networkKeys.ipamAll);
      return r.kvs.map((kv) => `${kv.key.slice(networkKeys.ipamAll.length)} ${kv.value}`).sort();
    } finally {
      store.close();
    }
  }

  const web = (name: string) => [
    'busybox:latest',
    'sh',
    '-c',
    `mkdir -p /www && echo ${name}-$(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www`,
  ];

  it('leaves on the host only what still runs, and that still works', async () => {
    const [m, w] = engines as [NsEngine, NsEngine];
    await m.dockerOk(['network', 'create', '-d', 'overlay', 'ov1']);
    await m.dockerOk(['network', 'create', '-d', 'overlay', 'ov2']);
    const common = ['service', 'create', '-d', '--constraint'];
    await m.dockerOk([
      ...common,
      'node.hostname==lkhost2',
      '--name',
      'keep',
      '--network',
      'ov1',
      ...web('keep'),
    ]);
    await m.dockerOk([
      ...common,
      'node.hostname==lkhost1',
      '--name',
      'client',
      '--network',
      'ov1',
      'busybox:latest',
      'sleep',
      '600',
    ]);
    const client = await until('the client running', 30_000, async () => {
      const ids = await m.dockerOk(['ps', '-q', '--filter', 'label=com.docker.swarm.service.name=client']);
      return ids.split('\n').filter(Boolean)[0];
    });
    const viaVip = async (what: string) => {
      const body = await until(`HTTP to keep by its VIP ${what}`, 45_000, async () => {
        const r = await m.docker([
          'exec',
          client,
          'sh',
          '-c',
          `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 keep 8080`,
        ]);
        return r.stdout.match(/keep-[0-9a-f]{12}/)?.[0];
      });
      return body;
    };
    const keepBefore = await viaVip('before');
    await sleep(1000); // what the agents do after their tasks run (VIP tables, peers) has settled
    const baseline = {
      host2: await hostState(2),
      peers1: await peerEntries(1),
      peers2: await peerEntries(2),
      claims: await claims(),
    };

    // the service that goes while the worker's engine is dead: two tasks on ov2, an ingress port
    await m.dockerOk([
      ...common,
      'node.hostname==lkhost2',
      '--name',
      'gone',
      '--replicas',
      '2',
      '--network',
      'ov2',
      '-p',
      '8090:8080',
      ...web('gone'),
    ]);
    await until('the ingress port answering on host 2', 45_000, async () => {
      const r = await net.exec(2, ['curl', '-s', '--max-time', '3', `http://${net.address(2)}:8090/`]);
      return r.stdout.includes('gone-') ? true : undefined;
    });
    const busy = await hostState(2);
    assert.ok(busy.veths > baseline.host2.veths, 'the gone tasks have their veths');
    assert.ok(busy.namespaces.length > baseline.host2.namespaces.length, 'ov2 and ingress have namespaces');
    assert.notDeepEqual(await claims(), baseline.claims);

    const pid = Number((await readFile(join(w.dir, 'exec', 'berth.pid'), 'utf8')).trim());
    await w.kill();
    assert.throws(() => process.kill(pid, 0), 'the engine is gone');
    await m.dockerOk(['service', 'rm', 'gone']);
    await w.launch();

    // the worker drops the removed service's containers and everything plumbed for them
    await until('the gone containers removed on host 2', 45_000, async () => {
      const ids = await w.dockerOk(['ps', '-aq', '--filter', 'label=com.docker.swarm.service.name=gone']);
      return ids === '' ? true : undefined;
    });
    assert.equal(await viaVip('after the restart'), keepBefore, 'the same task still answers');
    const after = await until('host 2 back to what it held before', 30_000, async () => {
      const s = await hostState(2);
      return JSON.stringify(s) === JSON.stringify(baseline.host2) ? s : undefined;
    }).catch(async () => hostState(2));
    assert.deepEqual(after, baseline.host2);
    assert.deepEqual(await peerEntries(2), baseline.peers2);
    assert.deepEqual(await peerEntries(1), baseline.peers1);
    assert.deepEqual(await claims(), baseline.claims);
    const r = await net.exec(2, ['curl', '-s', '--max-time', '2', `http://${net.address(2)}:8090/`]);
    assert.notEqual(r.code, 0, 'the ingress port is gone');

    await m.dockerOk(['service', 'rm', 'keep', 'client']);
  });
});
