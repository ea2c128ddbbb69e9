import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { eventually } from '../../helpers/eventually.js';
import { getLoopbackText } from '../../helpers/raw-http.js';

const exec = promisify(execFile);

/**
 * User-defined bridge networks through the docker CLI 28: create/inspect/ls/rm/prune, traffic
 * between containers by address, isolation between networks, Internal, connect/disconnect while
 * running, static --ip, events, and nothing left on the host.
 */

interface NetworkInspect {
  Id: string;
  Name: string;
  Driver: string;
  Internal: boolean;
  Attachable: boolean;
  IPAM: { Driver: string; Config: Array<{ Subnet: string; Gateway?: string; IPRange?: string }> };
  Options: Record<string, string>;
  Labels: Record<string, string>;
  Containers: Record<string, { Name: string; IPv4Address: string; EndpointID: string; MacAddress: string }>;
}

interface EndpointView {
  NetworkID: string;
  EndpointID: string;
  IPAddress: string;
  IPPrefixLen: number;
  Gateway: string;
  MacAddress: string;
  Aliases: string[] | null;
  DNSNames: string[] | null;
}

const links = async () => (await exec('ip', ['-o', 'link', 'show'])).stdout;
const iptablesSave = async () =>
  (await exec('iptables-save')).stdout + (await exec('iptables-save', ['-t', 'nat'])).stdout;

describe('user-defined bridge networks (docker CLI)', () => {
  let engine: TestEngine;

  const net = async (name: string) => {
    const r = await engine.request('GET', `/v1.41/networks/${name}`);
    assert.equal(r.status, 200, r.text());
    return r.json<NetworkInspect>();
  };
  const endpoints = async (c: string) => {
    const r = await engine.request('GET', `/v1.45/containers/${c}/json`);
    assert.equal(r.status, 200, r.text());
    return r.json<{ NetworkSettings: { Networks: Record<string, EndpointView>; IPAddress: string } }>()
      .NetworkSettings;
  };
  /**
   * An HTTP GET from container `from` to ip:8080 (busybox httpd) with a short timeout: true when it
   * answered. Through nc: the host's static busybox wget crashes in its resolver.
   */
  const reaches = async (from: string, ip: string) => {
    const get = `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 ${ip} 8080`;
    const r = await engine.docker(['exec', from, 'sh', '-c', get]);
    return r.code === 0 && r.stdout.includes('hello');
  };
  const server = async (name: string, args: string[]) => {
    await engine.dockerOk([
      'run',
      '-d',
      '--name',
      name,
      ...args,
      'busybox',
      'sh',
      '-c',
      'mkdir -p /www && echo hello > /www/index.html && exec httpd -f -p 8080 -h /www',
    ]);
  };

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
  });
  after(async () => {
    await engine?.destroy();
  });

  it('creates, inspects, lists with filters and removes networks', async () => {
    const since = Math.floor(Date.now() / 1000);
    const id = await engine.dockerOk([
      'network',
      'create',
      '--label',
      'team=a',
      '--subnet',
      '10.213.0.0/24',
      '--gateway',
      '10.213.0.254',
      '--ip-range',
      '10.213.0.128/25',
      '--aux-address',
      'r=10.213.0.129',
      '--opt',
      'com.docker.network.driver.mtu=1400',
      'n1',
    ]);
    assert.match(id, /^[0-9a-f]{64}$/);
    const n1 = await net('n1');
    assert.equal(n1.Id, id);
    assert.equal(n1.Driver, 'bridge');
    assert.deepEqual(n1.IPAM.Config, [
      {
        Subnet: '10.213.0.0/24',
        IPRange: '10.213.0.128/25',
        Gateway: '10.213.0.254',
        AuxiliaryAddresses: { r: '10.213.0.129' },
      },
    ]);
    assert.deepEqual(n1.Labels, { team: 'a' });
    assert.match(await links(), new RegExp(`br-${id.slice(0, 12)}`));

    const auto = await engine.dockerOk(['network', 'create', '--internal', 'n2']);
    const n2 = await net(auto);
    assert.equal(n2.Internal, true);
    assert.match(n2.IPAM.Config[0]?.Subnet ?? '', /^(172|192\.168)\./);

    // duplicates, predefined names, unknown drivers
    const dup = await engine.docker(['network', 'create', 'n1']);
    assert.notEqual(dup.code, 0);
    assert.match(dup.stderr, /already exists/);
    const drv = await engine.request('POST', '/v1.41/networks/create', {
      body: { Name: 'x', Driver: 'nope' },
    });
    assert.equal(drv.status, 404, drv.text());
    const pre = await engine.request('POST', '/v1.41/networks/create', { body: { Name: 'host' } });
    assert.equal(pre.status, 403);
    const overlap = await engine.request('POST', '/v1.41/networks/create', {
      body: { Name: 'x', IPAM: { Config: [{ Subnet: '10.213.0.0/16' }] } },
    });
    assert.equal(overlap.status, 403, overlap.text());

    const ls = (args: string[]) => engine.dockerOk(['network', 'ls', '--format', '{{.Name}}', ...args]);
    assert.deepEqual((await ls(['--filter', 'type=custom'])).split('\n').sort(), ['n1', 'n2']);
    assert.deepEqual((await ls(['--filter', 'type=builtin'])).split('\n').sort(), ['bridge', 'host', 'none']);
    assert.equal(await ls(['--filter', 'label=team=a']), 'n1');
    assert.equal(await ls(['--filter', `id=${auto.slice(0, 10)}`]), 'n2');
    assert.deepEqual((await ls(['--filter', 'dangling=true'])).split('\n').sort(), ['n1', 'n2']);
    assert.equal(await ls(['--filter', 'driver=null']), 'none');

    const rmPre = await engine.request('DELETE', '/v1.41/networks/bridge');
    assert.equal(rmPre.status, 403);
    await engine.dockerOk(['network', 'rm', 'n1', 'n2']);
    assert.doesNotMatch(await links(), new RegExp(`br-${id.slice(0, 12)}`));
    assert.doesNotMatch(await iptablesSave(), new RegExp(`br-${id.slice(0, 12)}`));
    const ev = await engine.events(since, '{{.Type}} {{.Action}} {{.Actor.Attributes.name}}', [
      'type=network',
    ]);
    assert.deepEqual(ev.split('\n'), [
      'network create n1',
      'network create n2',
      'network destroy n1',
      'network destroy n2',
    ]);
  });

  it('runs containers on a network: addresses, static --ip, traffic, inspect', async () => {
    await engine.dockerOk(['network', 'create', '--subnet', '10.214.0.0/24', 'web']);
    await server('srv', ['--network', 'web', '--ip', '10.214.0.50', '--network-alias', 'www']);
    await engine.dockerOk(['run', '-d', '--name', 'cli', '--network', 'web', 'busybox', 'sleep', '600']);
    const s = await endpoints('srv');
    const ep = s.Networks.web;
    assert.ok(ep, JSON.stringify(s));
    assert.equal(ep.IPAddress, '10.214.0.50');
    assert.equal(ep.IPPrefixLen, 24);
    assert.equal(ep.Gateway, '10.214.0.1');
    assert.equal(ep.MacAddress, '02:42:0a:d6:00:32');
    assert.deepEqual(ep.Aliases, ['www']);
    assert.ok(ep.DNSNames?.includes('srv') && ep.DNSNames.includes('www'), JSON.stringify(ep.DNSNames));
    assert.equal(s.IPAddress, '', 'top-level address is the default bridge one only');
    assert.equal((await endpoints('cli')).Networks.web?.IPAddress, '10.214.0.2');
    assert.ok(await reaches('cli', '10.214.0.50'));
    // the engine's DNS on the network: name, alias and short ID (resolv.conf names the responder)
    const resolv = await engine.dockerOk(['exec', 'cli', 'cat', '/etc/resolv.conf']);
    assert.match(resolv, /nameserver 10\.214\.0\.1/);
    const srvId = (await engine.dockerOk(['inspect', '-f', '{{.Id}}', 'srv'])).slice(0, 12);
    for (const name of ['srv', 'www', srvId, 'srv.web']) {
      const ns = await engine.dockerOk(['exec', 'cli', 'nslookup', '-type=a', name]);
      assert.match(ns, /Address:\s*10\.214\.0\.50/, `${name}: ${ns}`);
    }
    const route = await engine.dockerOk(['exec', 'cli', 'ip', 'route']);
    assert.match(route, /default via 10\.214\.0\.1/);
    const ps = await engine.dockerOk(['ps', '--filter', 'network=web', '--format', '{{.Names}}']);
    assert.deepEqual(ps.split('\n').sort(), ['cli', 'srv']);
    const n = await net('web');
    assert.deepEqual(
      Object.values(n.Containers)
        .map((c) => c.Name)
        .sort(),
      ['cli', 'srv'],
    );
    // a taken static address is refused
    const taken = await engine.docker([
      'run',
      '--rm',
      '--network',
      'web',
      '--ip',
      '10.214.0.50',
      'busybox',
      'true',
    ]);
    assert.notEqual(taken.code, 0);
    // removing a network with endpoints is refused
    const busy = await engine.request('DELETE', '/v1.41/networks/web');
    assert.equal(busy.status, 403, busy.text());
    assert.match(busy.text(), /active endpoints/);
    // --ip on the default bridge: dockerd's 400
    const bad = await engine.docker(['create', '--ip', '172.17.0.9', 'busybox']);
    assert.match(bad.stderr, /user specified IP address is supported on user defined networks only/);
  });

  it('isolates networks from each other, and Internal networks from the outside', async () => {
    await engine.dockerOk(['network', 'create', '--subnet', '10.215.0.0/24', 'other']);
    await engine.dockerOk([
      'run',
      '-d',
      '--name',
      'stranger',
      '--network',
      'other',
      'busybox',
      'sleep',
      '600',
    ]);
    const srvIp = (await endpoints('srv')).Networks.web?.IPAddress ?? '';
    assert.equal(await reaches('stranger', srvIp), false, 'another network cannot reach srv');
    const ns = await engine.docker(['exec', 'stranger', 'nslookup', '-type=a', 'srv']);
    assert.doesNotMatch(ns.stdout, /10\.214\.0\.50/, 'names are not visible across networks');
    // the default bridge cannot either
    await engine.dockerOk(['run', '-d', '--name', 'onbridge', 'busybox', 'sleep', '600']);
    assert.equal(await reaches('onbridge', srvIp), false, 'the default bridge cannot reach srv');

    await engine.dockerOk(['network', 'create', '--internal', '--subnet', '10.216.0.0/24', 'inner']);
    await server('insrv', ['--network', 'inner']);
    await engine.dockerOk(['run', '-d', '--name', 'incli', '--network', 'inner', 'busybox', 'sleep', '600']);
    const insrv = (await endpoints('insrv')).Networks.inner?.IPAddress ?? '';
    assert.ok(await reaches('incli', insrv), 'inside an internal network containers talk');
    // no way out: not to the host's other addresses, nor to other bridges
    const bridgeGw = (await net('bridge')).IPAM.Config[0]?.Gateway ?? '';
    const out = await engine.docker(['exec', 'incli', 'ping', '-c', '1', '-W', '1', srvIp]);
    assert.notEqual(out.code, 0);
    const route = await engine.dockerOk(['exec', 'incli', 'ip', 'route']);
    assert.doesNotMatch(route, /default/);

    // enable_icc=false: containers of one network cannot reach each other (a bridge of its own name)
    const brName = `bn${process.pid % 100000}`;
    await engine.dockerOk([
      'network',
      'create',
      '--subnet',
      '10.218.0.0/24',
      '-o',
      'com.docker.network.bridge.enable_icc=false',
      '-o',
      `com.docker.network.bridge.name=${brName}`,
      'noicc',
    ]);
    assert.match(await links(), new RegExp(`: ${brName}:`));
    await server('iccsrv', ['--network', 'noicc']);
    await engine.dockerOk(['run', '-d', '--name', 'icccli', '--network', 'noicc', 'busybox', 'sleep', '600']);
    const iccIp = (await endpoints('iccsrv')).Networks.noicc?.IPAddress ?? '';
    await eventually('httpd answers in its own container', () => reaches('iccsrv', iccIp));
    assert.equal(await reaches('icccli', iccIp), false, 'no traffic within a network without icc');
    await engine.dockerOk(['rm', '-f', 'iccsrv', 'icccli']);
    await engine.dockerOk(['network', 'rm', 'noicc']);
    assert.doesNotMatch(await links(), new RegExp(`: ${brName}:`));
    assert.ok(bridgeGw !== undefined);
  });

  it('connects and disconnects running and stopped containers', async () => {
    const since = Math.floor(Date.now() / 1000);
    const srvIp = (await endpoints('srv')).Networks.web?.IPAddress ?? '';
    assert.equal(await reaches('stranger', srvIp), false);
    await engine.dockerOk(['network', 'connect', '--alias', 'st', 'web', 'stranger']);
    const nets = (await endpoints('stranger')).Networks;
    assert.deepEqual(Object.keys(nets).sort(), ['other', 'web']);
    assert.ok(await reaches('stranger', srvIp), 'connected: reaches srv');
    const ifaces = await engine.dockerOk(['exec', 'stranger', 'ip', '-o', 'link']);
    assert.match(ifaces, /eth1/);
    const again = await engine.docker(['network', 'connect', 'web', 'stranger']);
    assert.notEqual(again.code, 0);
    await engine.dockerOk(['network', 'disconnect', 'web', 'stranger']);
    assert.deepEqual(Object.keys((await endpoints('stranger')).Networks), ['other']);
    assert.equal(await reaches('stranger', srvIp), false, 'disconnected: cannot reach srv');

    // a stopped container: the settings change, the interface comes at the next start
    await engine.dockerOk(['create', '--name', 'later', '--network', 'other', 'busybox', 'sleep', '600']);
    await engine.dockerOk(['network', 'connect', '--ip', '10.214.0.77', 'web', 'later']);
    await engine.dockerOk(['start', 'later']);
    const later = (await endpoints('later')).Networks;
    assert.equal(later.web?.IPAddress, '10.214.0.77');
    assert.ok(later.other?.IPAddress.startsWith('10.215.0.'));
    assert.ok(await reaches('later', srvIp));
    const ev = await engine.events(since, '{{.Action}} {{.Actor.Attributes.name}}', [
      'type=network',
      'event=connect',
      'event=disconnect',
    ]);
    // (the previous test's last removals may share this second)
    assert.deepEqual(
      ev.split('\n').filter((l) => !l.endsWith(' noicc')),
      ['connect web', 'disconnect web', 'connect other', 'connect web'],
    );
  });

  it('makes a legacy --link on a user-defined network a DNS alias of the linking container only', async () => {
    const srvIp = (await endpoints('srv')).Networks.web?.IPAddress ?? '';
    const lookup = async (from: string, name: string) =>
      (await engine.docker(['exec', from, 'nslookup', '-type=a', name])).stdout;
    // as dockerd 20.10: the target need not exist at create; no variables, no /etc/hosts line
    const missing = await engine.docker([
      'run',
      '--rm',
      '--network',
      'web',
      '--link',
      'nosuch:x',
      'busybox',
      'true',
    ]);
    assert.equal(missing.code, 0, missing.stderr);
    await engine.dockerOk([
      'run',
      '-d',
      '--name',
      'lk1',
      '--network',
      'web',
      '--link',
      'srv:db',
      'busybox',
      'sleep',
      '600',
    ]);
    const env = await engine.dockerOk(['exec', 'lk1', 'env']);
    assert.doesNotMatch(env, /DB_/);
    assert.doesNotMatch(await engine.dockerOk(['exec', 'lk1', 'cat', '/etc/hosts']), /\bdb\b/);
    assert.match(await lookup('lk1', 'db'), new RegExp(`Address:\\s*${srvIp.replaceAll('.', '\\.')}`));
    assert.match(await lookup('lk1', 'db.web'), new RegExp(`Address:\\s*${srvIp.replaceAll('.', '\\.')}`));
    const inspect = JSON.parse(
      await engine
        .dockerOk([
          'inspect',
          '-f',
          '{{json .HostConfig.Links}} {{json .NetworkSettings.Networks.web.Links}}',
          'lk1',
        ])
        .then((l) => `[${l.replace(' ', ',')}]`),
    ) as [unknown, unknown];
    assert.deepEqual(
      inspect,
      [null, ['srv:db']],
      "the link is the endpoint's (HostConfig.Links null, as dockerd)",
    );
    // another container on the network does not know the alias
    assert.doesNotMatch(await lookup('srv', 'db'), new RegExp(srvIp.replaceAll('.', '\\.')));
    // network connect --link: a container of the default bridge gets the engine's DNS and the alias
    await engine.dockerOk(['run', '-d', '--name', 'lk2', 'busybox', 'sleep', '600']);
    await engine.dockerOk(['network', 'connect', '--link', 'srv:dbx', 'web', 'lk2']);
    assert.match(await lookup('lk2', 'dbx'), new RegExp(`Address:\\s*${srvIp.replaceAll('.', '\\.')}`));
    assert.match(await lookup('lk2', 'srv'), new RegExp(`Address:\\s*${srvIp.replaceAll('.', '\\.')}`));
    await engine.dockerOk(['rm', '-f', 'lk1', 'lk2']);
  });

  it('publishes ports of a container on a user-defined network; the rules go with the network', async () => {
    await engine.dockerOk(['network', 'create', '--subnet', '10.217.0.0/24', 'pubnet']);
    const bridge = `br-${(await net('pubnet')).Id.slice(0, 12)}`;
    await server('pub', ['--network', 'pubnet', '-p', '127.0.0.1::8080']);
    const port = Number((await engine.dockerOk(['port', 'pub', '8080/tcp'])).split(':').at(-1));
    assert.ok(port > 0);
    let body = '';
    await eventually('the published port to answer', async () => {
      body = await getLoopbackText(port);
      return body.includes('hello');
    });
    assert.match(await iptablesSave(), new RegExp(`BERTH-DNAT-${bridge}`));
    await engine.dockerOk(['rm', '-f', 'pub']);
    await engine.dockerOk(['network', 'rm', 'pubnet']);
    await eventually(
      'the port rules of the network gone',
      async () => !(await iptablesSave()).includes(bridge),
    );
  });

  it('connects a container again after it restarted on no network at all (its own namespace)', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'loner', 'busybox', 'sleep', '600']);
    await engine.dockerOk(['network', 'disconnect', 'bridge', 'loner']);
    await engine.dockerOk(['restart', '-t', '0', 'loner']);
    assert.match(await engine.dockerOk(['exec', 'loner', 'ip', '-o', 'link']), /^1: lo:/);
    assert.doesNotMatch(await engine.dockerOk(['exec', 'loner', 'ip', '-o', 'link']), /eth0/);
    await engine.dockerOk(['network', 'connect', 'bridge', 'loner']);
    assert.match(await engine.dockerOk(['exec', 'loner', 'ip', '-o', '-4', 'addr', 'show', 'eth0']), /inet /);
    await engine.dockerOk(['rm', '-f', 'loner']);
  });

  it('prunes unused networks and leaves nothing behind', async () => {
    await engine.dockerOk(['network', 'create', '--label', 'keep=no', 'p1']);
    const p1 = (await net('p1')).Id;
    const pruned = await engine.dockerOk(['network', 'prune', '-f', '--filter', 'label=keep=no']);
    assert.match(pruned, /p1/);
    assert.doesNotMatch(pruned, /web/);
    assert.doesNotMatch(await links(), new RegExp(`br-${p1.slice(0, 12)}`));
    const ids = (await engine.dockerOk(['network', 'ls', '-q', '--filter', 'type=custom'])).split('\n');
    const bridges = await Promise.all(ids.map(async (id) => `br-${(await net(id)).Id.slice(0, 12)}`));
    await engine.dockerOk(['rm', '-f', 'srv', 'cli', 'stranger', 'onbridge', 'insrv', 'incli', 'later']);
    await engine.dockerOk(['network', 'prune', '-f']);
    assert.equal(await engine.dockerOk(['network', 'ls', '-q', '--filter', 'type=custom']), '');
    await eventually('the sandboxes released', async () => {
      const l = await links();
      return bridges.every((b) => !l.includes(b));
    });
    const rules = await iptablesSave();
    for (const b of bridges) assert.doesNotMatch(rules, new RegExp(b));
  });
});
