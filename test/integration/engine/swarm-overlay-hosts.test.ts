import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { networkKeys } from '../../../src/engine/swarm/networks/network-keys.js';
import { EtcdStore } from '../../../src/engine/swarm/store/etcd-store.js';
import { BUSYBOX_CHANGES, busyboxTarball } from '../../helpers/busybox.js';
import { until } from '../../helpers/eventually.js';
import { engineLogsOnFailure, NsEngine, TestNetwork } from '../../helpers/swarm-netns.js';
import { overlayNamespaces, runningTaskContainer } from '../../helpers/swarm-overlay.js';

/**
 * An overlay network across three hosts (network namespaces on one switch; a manager and two
 * workers): a busybox task on host 1 fetches HTTP from a service's tasks on host 2 over VXLAN, by
 * the service's name (dnsrr), by `tasks.<name>` and by a task's address; a vip service's name
 * resolves to its VIP. A worker's engine killed with SIGKILL and started again plumbs its tasks
 * again. After the services and the network are removed, and after leave, no overlay namespace,
 * VXLAN device, gateway bridge, NAT rule or address claim is left.
 */
describe('swarm overlay networks across three hosts', () => {
  let net: TestNetwork;
  let engines: NsEngine[] = [];

  engineLogsOnFailure(() => engines);
  before(async () => {
    net = await TestNetwork.create(3, '192.168.207');
    engines = await Promise.all([1, 2, 3].map((i) => NsEngine.start(net.hosts[i - 1] ?? '', `ovhost${i}`)));
    const tar = await busyboxTarball();
    await Promise.all(engines.map((e) => e.dockerOk(['import', ...BUSYBOX_CHANGES, tar, 'busybox:latest'])));
    const [m, w2, w3] = engines as [NsEngine, NsEngine, NsEngine];
    await m.dockerOk(['swarm', 'init', '--dispatcher-heartbeat', '1s']);
    const token = await m.dockerOk(['swarm', 'join-token', '-q', 'worker']);
    for (const w of [w2, w3]) await w.dockerOk(['swarm', 'join', '--token', token, `${net.address(1)}:2377`]);
  });
  after(async () => {
    await Promise.all(engines.slice(1).map((e) => e.destroy()));
    await engines[0]?.destroy();
    await net?.destroy();
  });

  it('carries HTTP between hosts by service name, tasks.<name> and address; nothing left after', async () => {
    const [m, w2] = engines as [NsEngine, NsEngine, NsEngine];
    await m.dockerOk(['network', 'create', '-d', 'overlay', 'ov']);
    await m.dockerOk([
      'service',
      'create',
      '-d',
      '--name',
      'web',
      '--network',
      'ov',
      '--endpoint-mode',
      'dnsrr',
      '--replicas',
      '2',
      '--constraint',
      'node.hostname==ovhost2',
      'busybox:latest',
      'sh',
      '-c',
      'mkdir -p /www && echo hello-from-$(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www',
    ]);
    await m.dockerOk([
      'service',
      'create',
      '-d',
      '--name',
      'vipweb',
      '--network',
      'ov',
      '--constraint',
      'node.hostname==ovhost3',
      'busybox:latest',
      'sh',
      '-c',
      'mkdir -p /www && echo vip-$(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www',
    ]);
    await m.dockerOk([
      'service',
      'create',
      '-d',
      '--name',
      'pub',
      '-p',
      '8088:8080',
      '--constraint',
      'node.hostname==ovhost2',
      'busybox:latest',
      'sh',
      '-c',
      'mkdir -p /www && echo pub-$(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www',
    ]);
    await m.dockerOk([
      'service',
      'create',
      '-d',
      '--name',
      'client',
      '--network',
      'ov',
      '--constraint',
      'node.hostname==ovhost1',
      'busybox:latest',
      'sleep',
      '300',
    ]);
    const client = await runningTaskContainer(m, 'client');
    await runningTaskContainer(w2, 'web');
    const exec = (cmd: string[]) => m.docker(['exec', client, ...cmd]);

    // tasks.web: both tasks' addresses (from the task objects' attachments)
    const tasks = JSON.parse(
      await m
        .dockerOk(['service', 'ps', '--no-trunc', '-q', '--filter', 'desired-state=running', 'web'])
        .then(
          async (ids) =>
            `[${(await Promise.all(ids.split('\n').map((id) => m.dockerOk(['inspect', '--type', 'task', id]).catch(() => m.dockerOk(['inspect', id]))))).map((j) => j.slice(1, -1)).join(',')}]`,
        ),
    ) as Array<{ NetworksAttachments: Array<{ Addresses: string[] }> }>;
    const webIps = tasks.map((t) => t.NetworksAttachments[0]?.Addresses[0]?.split('/')[0] ?? '').sort();
    assert.equal(webIps.length, 2);
    for (const ip of webIps) assert.match(ip, /^10\.0\.1\.\d+$/);

    const lookup = await until('tasks.web resolves to both tasks', 30_000, async () => {
      const r = await exec(['nslookup', 'tasks.web']);
      const found = [...r.stdout.matchAll(/Address(?: \d+)?:\s+(10\.0\.1\.\d+)/g)].map((x) => x[1]).sort();
      return found.length === 2 ? found : undefined;
    });
    assert.deepEqual(lookup, webIps);

    for (const target of ['web', 'tasks.web', webIps[0] ?? '']) {
      const body = await until(`HTTP from host 1 to ${target} on host 2`, 30_000, async () => {
        // through nc: the static busybox's wget crashes in its resolver here (networks-user.test.ts)
        const r = await exec(['sh', '-c', `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 ${target} 8080`]);
        const body = r.stdout.split('\r\n\r\n')[1]?.trim();
        return r.code === 0 && body?.startsWith('hello-from-') ? body : undefined;
      });
      assert.match(body, /^hello-from-[0-9a-f]{12}$/);
    }

    // a vip service's name is its VIP
    const [vipweb] = JSON.parse(await m.dockerOk(['service', 'inspect', 'vipweb'])) as Array<{
      Endpoint: { VirtualIPs: Array<{ Addr: string }> };
    }>;
    const vip = vipweb?.Endpoint.VirtualIPs[0]?.Addr.split('/')[0] ?? '';
    assert.match(vip, /^10\.0\.1\.\d+$/);
    await until('vipweb resolves to its VIP', 20_000, async () => {
      const r = await exec(['nslookup', 'vipweb']);
      return r.stdout.includes(vip) ? true : undefined;
    });

    // the VIP carries HTTP (network/lb's NftServiceLb), the mesh answers on every host
    await until('HTTP to vipweb by its VIP', 30_000, async () => {
      const r = await exec(['sh', '-c', `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 vipweb 8080`]);
      return r.stdout.includes('vip-') ? r.stdout : undefined;
    });
    for (let i = 1; i <= 3; i++) {
      await until(`the mesh on host ${i}, with or without a task of the service`, 30_000, async () => {
        const r = await net.exec(i, ['curl', '-s', '--max-time', '3', `http://${net.address(i)}:8088/`]);
        return r.stdout.includes('pub-') ? r.stdout : undefined;
      });
    }

    // a worker lists the networks its tasks use (dockerd does), and only those
    const onWorker = await w2.dockerOk(['network', 'ls', '--filter', 'scope=swarm', '--format', '{{.Name}}']);
    assert.deepEqual(onWorker.split('\n').sort(), ['ingress', 'ov']);
    const [wv] = JSON.parse(await w2.dockerOk(['network', 'inspect', 'ov'])) as Array<{
      Scope: string;
      IPAM: { Config: unknown };
    }>;
    assert.equal(wv?.Scope, 'swarm');
    assert.deepEqual(wv?.IPAM.Config, [{ Subnet: '10.0.1.0/24', Gateway: '10.0.1.1' }]);

    // the overlay block is in no host's routing table; each host with a task has the network's namespace
    for (let i = 1; i <= 3; i++) {
      const routes = await net.exec(i, ['ip', '-4', 'route']);
      assert.ok(!routes.stdout.includes('10.0.1.'), routes.stdout);
      assert.equal((await overlayNamespaces(engines[i - 1] as NsEngine)).length, 2);
    }

    // host 2's engine killed with SIGKILL and started again: what it plumbed is swept and made
    // again from the managers' picture (its task containers kept running, or were replaced)
    const pid = Number((await readFile(join(w2.dir, 'exec', 'berth.pid'), 'utf8')).trim());
    process.kill(pid, 'SIGKILL');
    await until('the killed engine gone', 10_000, async () => {
      try {
        process.kill(pid, 0);
        return undefined;
      } catch {
        return true;
      }
    });
    await w2.launch();
    await until('HTTP to web again after the restart', 45_000, async () => {
      const r = await exec(['sh', '-c', `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 web 8080`]);
      return r.stdout.includes('hello-from-') ? true : undefined;
    });
    assert.equal((await overlayNamespaces(w2)).length, 2, 'ov and ingress on host 2');

    await m.dockerOk(['service', 'rm', 'web', 'vipweb', 'client', 'pub']);
    await until('every overlay namespace gone after the services', 30_000, async () => {
      for (const e of engines) if ((await overlayNamespaces(e)).length > 0) return undefined;
      return true;
    });
    assert.equal(
      await w2.dockerOk(['network', 'ls', '--filter', 'scope=swarm', '--format', '{{.Name}}']),
      '',
    );
    await until('the network can go once its tasks are gone', 20_000, async () => {
      const r = await m.docker(['network', 'rm', 'ov']);
      return r.code === 0 ? true : undefined;
    });
    const swarmNets = await m.dockerOk(['network', 'ls', '--filter', 'scope=swarm', '--format', '{{.Name}}']);
    assert.equal(swarmNets, 'ingress');
    // the only address claim left is the ingress network's gateway
    const store = new EtcdStore({ socketPath: join(m.dir, 'exec', 'swarm', 'etcd.sock:0') });
    try {
      const claims = await until('every task and VIP address released', 10_000, async () => {
        const r = await store.range(networkKeys.ipamAll);
        return r.kvs.length === 1 ? r.kvs : undefined;
      });
      assert.match(claims[0]?.key ?? '', /\/10\.0\.0\.1$/);
    } finally {
      store.close();
    }

    for (const e of [...engines].reverse()) await e.dockerOk(['swarm', 'leave', '--force']);
    for (let i = 1; i <= 3; i++) {
      const links = await net.exec(i, ['ip', '-j', '-d', 'link']);
      const parsed = JSON.parse(links.stdout || '[]') as Array<{
        ifname: string;
        linkinfo?: { info_kind?: string };
      }>;
      assert.deepEqual(
        parsed
          .filter(
            (l) =>
              l.linkinfo?.info_kind === 'vxlan' ||
              (l.linkinfo?.info_kind === 'veth' && l.ifname !== 'eth0') ||
              l.ifname === 'docker_gwbridge',
          )
          .map((l) => l.ifname),
        [],
        `host ${i}`,
      );
      const nat = await net.exec(i, ['iptables', '-w', '-t', 'nat', '-S', 'POSTROUTING']);
      assert.ok(!nat.stdout.includes('docker_gwbridge'), nat.stdout);
      assert.deepEqual(await overlayNamespaces(engines[i - 1] as NsEngine), []);
    }
  });
});
