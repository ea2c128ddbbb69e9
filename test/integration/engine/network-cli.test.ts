import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import type {
  ContainerInspect,
  NetworkSettingsView,
} from '../../../src/engine/containers/core/views.types.js';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { eventually } from '../../helpers/eventually.js';
import { referenceJson } from '../../helpers/reference.js';

const exec = promisify(execFile);

/** The default bridge through the real docker CLI (28) and the raw API: addresses, traffic, links. */

/** Inspect at API 1.41: NetworkSettings with dockerd 20.10's whole set. */
type Inspect = Omit<ContainerInspect, 'NetworkSettings'> & { NetworkSettings: Required<NetworkSettingsView> };

interface NetworkInspect {
  Id: string;
  Name: string;
  IPAM: { Config: Array<{ Subnet: string; Gateway?: string }> };
  Options: Record<string, string>;
  Containers: Record<string, { Name: string; IPv4Address: string; EndpointID: string; MacAddress: string }>;
}

function inSubnet(ip: string, subnet: string): boolean {
  const toNum = (a: string) => a.split('.').reduce((n, p) => n * 256 + Number(p), 0);
  const [base = '', len = '32'] = subnet.split('/');
  const span = 2 ** (32 - Number(len));
  return Math.floor(toNum(ip) / span) === Math.floor(toNum(base) / span);
}

describe('default bridge network (docker CLI)', () => {
  let engine: TestEngine;
  let bridge: NetworkInspect;

  const inspect = async (name: string, version = '1.41') => {
    const r = await engine.request('GET', `/v${version}/containers/${name}/json`);
    assert.equal(r.status, 200, r.text());
    return r.json<Inspect>();
  };
  const inspectBridgeGateway = async () =>
    JSON.parse((await exec('ip', ['-j', '-4', 'addr', 'show', 'dev', engine.bridge])).stdout)[0].addr_info[0]
      .local as string;
  const ipamFile = (ip: string) => join(engine.dataRoot, 'network', 'ipam', engine.bridge, ip);
  /**
   * The sandbox's address is released: its file gone, or naming another sandbox (the pool plumbs
   * a freed address again at once, docs/networking.md "Sandboxes made ahead").
   */
  const released = (ip: string, sandboxId: string) => {
    try {
      return !readFileSync(ipamFile(ip), 'utf8').startsWith(sandboxId);
    } catch {
      return true;
    }
  };
  const natRules = async () => (await exec('iptables', ['-w', '-t', 'nat', '-S'])).stdout;

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
    bridge = (await engine.request('GET', '/v1.41/networks/bridge')).json<NetworkInspect>();
  });
  after(async () => {
    await engine?.destroy();
  });

  it('sets up its own bridge with a free block and shows it as the bridge network', async () => {
    const subnet = bridge.IPAM.Config[0]?.Subnet ?? '';
    assert.match(subnet, /^(172\.(1[7-9]|2\d|3[01])\.0\.0\/16|192\.168\.\d+\.0\/20)$/);
    assert.equal(bridge.Options['com.docker.network.bridge.name'], engine.bridge);
    const link = JSON.parse(
      (await exec('ip', ['-j', '-4', 'addr', 'show', 'dev', engine.bridge])).stdout,
    ) as Array<{
      addr_info: Array<{ local: string; prefixlen: number }>;
    }>;
    const addr = link[0]?.addr_info[0];
    assert.ok(addr && inSubnet(addr.local, subnet), `bridge address ${JSON.stringify(addr)} in ${subnet}`);
    const ls = await engine.dockerOk(['network', 'ls', '--format', '{{.Name}} {{.Driver}} {{.Scope}}']);
    assert.deepEqual(ls.split('\n').sort(), ['bridge bridge local', 'host host local', 'none null local']);
    const none = (await engine.request('GET', '/v1.41/networks/none')).json<NetworkInspect>();
    assert.deepEqual(none.IPAM.Config, []);
    assert.equal((await engine.request('GET', '/v1.41/networks/nope')).status, 404);
    assert.equal(
      (await engine.request('GET', `/v1.41/networks/${bridge.Id.slice(0, 12)}`)).json<NetworkInspect>().Name,
      'bridge',
    );
  });

  it('network writes: predefined networks refused as dockerd does', async () => {
    const createBridge = await engine.request('POST', '/v1.44/networks/create', { body: { Name: 'bridge' } });
    assert.equal(createBridge.status, 403);
    assert.equal(
      createBridge.json<{ message: string }>().message,
      'operation is not permitted on predefined bridge network',
    );
    for (const name of ['bridge', 'host', 'none']) {
      const rm = await engine.docker(['network', 'rm', name]);
      assert.match(rm.stderr, new RegExp(`${name} is a pre-defined network and cannot be removed`));
    }
    assert.equal((await engine.request('DELETE', '/v1.44/networks/nonet')).status, 404);
    const connect = await engine.request('POST', '/v1.44/networks/bridge/connect', {
      body: { Container: 'x' },
    });
    assert.equal(connect.status, 404);
    const pruned = await engine.request('POST', '/v1.44/networks/prune');
    assert.deepEqual(pruned.json(), { NetworksDeleted: null });
    assert.equal(await engine.dockerOk(['network', 'prune', '-f']), '');
    assert.equal((await engine.request('GET', '/v1.44/networks/bridge?verbose=maybe')).status, 400);
    assert.equal((await engine.request('GET', '/v1.44/networks/bridge?verbose=true')).status, 200);
    assert.equal((await engine.request('GET', '/v1.44/networks/bridge?scope=swarm')).status, 404);
    assert.equal((await engine.request('GET', '/v1.44/networks/bridge?scope=local')).status, 200);
  });

  it('gives a container eth0 with an address on the bridge, the default route and its own hosts line', async () => {
    const out = await engine.dockerOk([
      'run',
      '--rm',
      '--hostname',
      'web',
      'busybox',
      'sh',
      '-c',
      'ip -4 addr show eth0; ip route; tail -1 /etc/hosts; ip link show lo',
    ]);
    const m = /inet (\d+\.\d+\.\d+\.\d+)\/(\d+)/.exec(out);
    assert.ok(m, out);
    const subnet = bridge.IPAM.Config[0]?.Subnet ?? '';
    assert.ok(inSubnet(m[1] ?? '', subnet), `${m[1]} in ${subnet}`);
    assert.equal(m[2], subnet.split('/')[1]);
    const gateway = bridge.IPAM.Config[0]?.Gateway ?? subnet.replace(/\.0\/\d+$/, '.1');
    assert.match(out, new RegExp(`default via ${gateway.replaceAll('.', '\\.')} dev eth0`));
    assert.match(out, new RegExp(`^${m[1]?.replaceAll('.', '\\.')}\\tweb$`, 'm'));
    assert.match(out, /lo: <LOOPBACK,UP,LOWER_UP>/);
  });

  it('lets two containers talk over the bridge, and reach the gateway', async () => {
    // nc's stdin held open: with /dev/null (as for any -d container) busybox nc may see its EOF and
    // leave before reading what the client sent (seen under load, with dockerd too)
    await engine.dockerOk([
      'run',
      '-d',
      '--name',
      'listener',
      'busybox',
      'sh',
      '-c',
      'sleep 60 | nc -l -p 8080',
    ]);
    const ip = (await inspect('listener')).NetworkSettings.IPAddress;
    const gateway = (await inspect('listener')).NetworkSettings.Gateway;
    const client = await engine.docker(
      [
        'run',
        '--rm',
        'busybox',
        'sh',
        '-c',
        `ping -c 1 -W 5 ${gateway} >/dev/null && echo hello-over-the-bridge | nc -w 5 ${ip} 8080`,
      ],
      { timeoutMs: 60_000 },
    );
    assert.equal(client.code, 0, client.stderr);
    await eventually('the listener to print what it got', async () =>
      (await engine.dockerOk(['logs', 'listener'])).includes('hello-over-the-bridge'),
    );
    await engine.dockerOk(['rm', '-f', 'listener']);
  });

  it('refuses at create what does not exist or needs a user-defined network (400: the CLI pulls on a 404)', async () => {
    const cases: Array<[string[], string]> = [
      [['--network', 'nonet'], 'network nonet not found'],
      [['--network', 'container:nope'], 'No such container: nope'],
      [['--volumes-from', 'nope'], 'No such container: nope'],
      [['--ip', '172.99.0.5'], 'user specified IP address is supported on user defined networks only'],
    ];
    for (const [flags, message] of cases) {
      const r = await engine.docker(['run', '--rm', ...flags, 'busybox', 'true']);
      assert.equal(r.code, 125, `${flags.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, new RegExp(message.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
      assert.doesNotMatch(r.stderr, /Unable to find image|pull/, flags.join(' '));
    }
    // (the CLI refuses --network-alias on the default network itself)
    const alias = await engine.request('POST', '/v1.44/containers/create', {
      body: { Image: 'busybox', NetworkingConfig: { EndpointsConfig: { bridge: { Aliases: ['web'] } } } },
    });
    assert.equal(alias.status, 400);
    assert.equal(
      alias.json<{ message: string }>().message,
      'network-scoped alias is supported only for containers in user defined networks',
    );
    const two = await engine.request('POST', '/v1.44/containers/create', {
      body: { Image: 'busybox', NetworkingConfig: { EndpointsConfig: { bridge: {}, none: {} } } },
    });
    assert.equal(two.status, 400);
    assert.equal(
      two.json<{ message: string }>().message,
      'Container cannot be connected to network endpoints: bridge, none',
    );
    assert.equal(await engine.dockerOk(['ps', '-aq', '--filter', 'status=created']), '');
  });

  it("host network: the host's /etc/hosts, or the default lines and ExtraHosts; the container's hostname", async () => {
    const plain = await engine.dockerOk(['run', '--rm', '--network', 'host', 'busybox', 'cat', '/etc/hosts']);
    assert.equal(`${plain}\n`, await readFile('/etc/hosts', 'utf8').then((t) => `${t.trimEnd()}\n`));
    const extra = await engine.dockerOk([
      'run',
      '--rm',
      '--network',
      'host',
      '--add-host',
      'q:1.1.1.1',
      '--hostname',
      'hh',
      'busybox',
      'sh',
      '-c',
      'cat /etc/hosts; cat /etc/hostname; hostname',
    ]);
    const lines = extra.split('\n');
    assert.equal(lines[0], '127.0.0.1\tlocalhost');
    assert.ok(lines.includes('1.1.1.1\tq'), extra);
    assert.deepEqual(lines.slice(-2), ['hh', 'hh']);
  });

  it('has no IPv6 in the container (as dockerd on a network without it), unless --sysctl turns it on', async () => {
    for (const mode of ['bridge', 'none']) {
      const addrs = await engine.dockerOk(['run', '--rm', '--network', mode, 'busybox', 'ip', '-o', 'addr']);
      assert.doesNotMatch(addrs, /inet6/, `${mode}: ${addrs}`);
      assert.match(addrs, /inet 127\.0\.0\.1/);
    }
    const on = await engine.dockerOk([
      'run',
      '--rm',
      '--sysctl',
      'net.ipv6.conf.all.disable_ipv6=0',
      'busybox',
      'cat',
      '/proc/sys/net/ipv6/conf/all/disable_ipv6',
    ]);
    assert.equal(on, '0');
  });

  it("host-gateway in --add-host is the bridge address (dockerd: docker0's)", async () => {
    const gateway = bridge.IPAM.Config[0]?.Gateway ?? (await inspectBridgeGateway());
    const line = await engine.dockerOk([
      'run',
      '--rm',
      '--add-host',
      'gw:host-gateway',
      'busybox',
      'grep',
      'gw',
      '/etc/hosts',
    ]);
    assert.equal(line, `${gateway}\tgw`);
  });

  it('masquerades what leaves the block through another interface (one nat rule for the bridge)', async () => {
    const subnet = bridge.IPAM.Config[0]?.Subnet ?? '';
    const rules = (await natRules()).split('\n').filter((l) => l.includes(`"berth bridge ${engine.bridge}"`));
    assert.deepEqual(rules, [
      `-A POSTROUTING -s ${subnet} ! -o ${engine.bridge} -m comment --comment "berth bridge ${engine.bridge}" -j MASQUERADE`,
    ]);
    // a host of the test's own behind a veth pair, with no route back to the bridge's block: it
    // answers only when the container's address was masqueraded to the host side's
    const tag = randomBytes(3).toString('hex');
    const ns = `bo${tag}`;
    const hostIf = `bo${tag}h`;
    const octet = 1 + ((randomBytes(1)[0] ?? 0) % 250);
    const [hostIp, peerIp] = [`198.18.${octet}.1`, `198.18.${octet}.2`];
    await exec('ip', ['netns', 'add', ns]);
    let server: ChildProcess | undefined;
    try {
      await exec('ip', ['link', 'add', hostIf, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
      await exec('ip', ['addr', 'add', `${hostIp}/30`, 'dev', hostIf]);
      await exec('ip', ['link', 'set', hostIf, 'up']);
      await exec('ip', ['-n', ns, 'addr', 'add', `${peerIp}/30`, 'dev', 'eth0']);
      await exec('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
      const script = `require('net').createServer((s) => s.end(s.remoteAddress + '\\n')).listen(9000, '${peerIp}', () => console.log('up'))`;
      server = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', script], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      await new Promise<void>((resolve, reject) => {
        server?.stdout?.once('data', () => resolve());
        server?.once('exit', (code) => reject(new Error(`the test server exited (${code})`)));
      });
      const seen = await engine.dockerOk(['run', '--rm', 'busybox', 'nc', '-w', '5', peerIp, '9000'], {
        timeoutMs: 30_000,
      });
      assert.equal(seen, hostIp);
    } finally {
      if (server?.pid) process.kill(server.pid);
      await exec('ip', ['netns', 'delete', ns]);
    }
  });

  it('fills NetworkSettings while running as dockerd does, keeps sandbox and network IDs after a stop', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'insp', 'busybox', 'sleep', '300']);
    const run = await inspect('insp');
    const ns = run.NetworkSettings;
    const ep = ns.Networks.bridge;
    assert.ok(ep);
    assert.match(ns.SandboxID, /^[0-9a-f]{64}$/);
    assert.equal(ns.SandboxKey, join(engine.execRoot, 'netns', ns.SandboxID.slice(0, 12)));
    assert.ok(existsSync(ns.SandboxKey));
    assert.equal(ns.Bridge, '');
    assert.match(ns.EndpointID, /^[0-9a-f]{64}$/);
    assert.equal(ep.EndpointID, ns.EndpointID);
    assert.equal(ep.NetworkID, bridge.Id);
    assert.equal(ep.IPAddress, ns.IPAddress);
    assert.equal(ep.Gateway, ns.Gateway);
    assert.equal(ep.IPPrefixLen, ns.IPPrefixLen);
    assert.match(ns.MacAddress, /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
    assert.equal(ep.MacAddress, ns.MacAddress);
    assert.equal(ep.Links, null);
    assert.equal(ep.Aliases, null);
    // key order and shape per version, as the reference dockerd's
    for (const v of ['1.24', '1.41'] as const) {
      const ref = referenceJson<{ NetworkSettings: { Networks: { bridge: object } } }>(
        `container-inspect.v${v}.json`,
      ).NetworkSettings;
      const got = (await inspect('insp', v)).NetworkSettings;
      assert.deepEqual(Object.keys(got), Object.keys(ref), v);
      assert.deepEqual(Object.keys(got.Networks.bridge ?? {}), Object.keys(ref.Networks.bridge), v);
    }
    // the network shows it
    const net = (await engine.request('GET', '/v1.41/networks/bridge')).json<NetworkInspect>();
    assert.deepEqual(net.Containers[run.Id], {
      Name: 'insp',
      EndpointID: ns.EndpointID,
      MacAddress: ns.MacAddress,
      IPv4Address: `${ns.IPAddress}/${ns.IPPrefixLen}`,
      IPv6Address: '',
    });
    assert.ok(existsSync(ipamFile(ns.IPAddress)));
    // the network filter takes the network's name or a prefix of its ID
    for (const value of ['bridge', bridge.Id, bridge.Id.slice(0, 12)]) {
      const ids = await engine.dockerOk(['ps', '-q', '--no-trunc', '--filter', `network=${value}`]);
      assert.ok(ids.split('\n').includes(run.Id), `network=${value}`);
    }
    assert.equal(await engine.dockerOk(['ps', '-q', '--filter', 'network=nonet']), '');

    await engine.dockerOk(['stop', '-t', '0', 'insp']);
    const stopped = (await inspect('insp')).NetworkSettings;
    assert.equal(stopped.IPAddress, '');
    assert.equal(stopped.EndpointID, '');
    assert.equal(stopped.Gateway, '');
    assert.equal(stopped.MacAddress, '');
    assert.equal(stopped.SandboxID, ns.SandboxID);
    assert.equal(stopped.SandboxKey, ns.SandboxKey);
    assert.equal(stopped.Networks.bridge?.NetworkID, bridge.Id);
    assert.equal(stopped.Networks.bridge?.IPAddress, '');
    // released: the address, the namespace, the masquerading chain
    await eventually('the address to be released', () => released(ns.IPAddress, ns.SandboxID));
    await eventually('the namespace to be removed', () => !existsSync(ns.SandboxKey));
    assert.deepEqual(
      (await engine.request('GET', '/v1.41/networks/bridge')).json<NetworkInspect>().Containers[run.Id],
      undefined,
    );

    // started again: a new sandbox that works
    await engine.dockerOk(['start', 'insp']);
    const again = (await inspect('insp')).NetworkSettings;
    assert.notEqual(again.SandboxID, ns.SandboxID);
    assert.ok(inSubnet(again.IPAddress, bridge.IPAM.Config[0]?.Subnet ?? ''));
    const ping = await engine.docker([
      'run',
      '--rm',
      '--network',
      'container:insp',
      'busybox',
      'ping',
      '-c',
      '1',
      '-W',
      '5',
      again.Gateway,
    ]);
    assert.equal(ping.code, 0, ping.stdout + ping.stderr);
    await engine.dockerOk(['rm', '-f', 'insp']);
    await eventually('the address of the removed container to be released', () =>
      released(again.IPAddress, again.SandboxID),
    );
  });

  it('restarts with a working network (docker restart)', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'rs', 'busybox', 'sleep', '300']);
    await engine.dockerOk(['restart', '-t', '0', 'rs']);
    const ns = (await inspect('rs')).NetworkSettings;
    assert.ok(ns.IPAddress);
    const ping = await engine.docker([
      'run',
      '--rm',
      '--network',
      'container:rs',
      'busybox',
      'ping',
      '-c',
      '1',
      '-W',
      '5',
      ns.Gateway,
    ]);
    assert.equal(ping.code, 0, ping.stdout + ping.stderr);
    await engine.dockerOk(['rm', '-f', 'rs']);
  });

  it('releases the sandbox of a container that exits by itself', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'short', 'busybox', 'sh', '-c', 'sleep 1']);
    const ns = (await inspect('short')).NetworkSettings;
    assert.ok(ns.IPAddress);
    assert.equal(await engine.dockerOk(['wait', 'short']), '0');
    await eventually('the address to be released', () => released(ns.IPAddress, ns.SandboxID));
    await eventually('the namespace to be removed', () => !existsSync(ns.SandboxKey));
    await engine.dockerOk(['rm', 'short']);
  });

  it('announces network connect before start and disconnect after die', async () => {
    const since = Math.floor(Date.now() / 1000) - 1;
    const id = await engine.dockerOk(['run', '-d', 'busybox', 'true']);
    await engine.dockerOk(['wait', id]);
    await engine.dockerOk(['rm', id]);
    const out = await engine.events(
      since,
      '{{.Type}} {{.Action}} {{.Actor.ID}} {{.Actor.Attributes.container}} {{.Actor.Attributes.name}} {{.Actor.Attributes.type}}',
    );
    const mine = out
      .split('\n')
      .filter((l) => l.includes(id))
      .map((l) => l.split(' '));
    assert.deepEqual(
      mine.map((f) => `${f[0]} ${f[1]}`),
      [
        'container create',
        'network connect',
        'container start',
        'container die',
        'network disconnect',
        'container destroy',
      ],
    );
    const connect = mine[1] ?? [];
    assert.deepEqual(connect.slice(2), [bridge.Id, id, 'bridge', 'bridge']);
  });

  it('keeps none, host and container: modes working', async () => {
    const none = await engine.dockerOk(['run', '--rm', '--network', 'none', 'busybox', 'ip', '-o', 'link']);
    assert.deepEqual(
      none.split('\n').map((l) => l.split(':')[1]?.trim()),
      ['lo'],
    );
    const host = await engine.dockerOk(['run', '--rm', '--network', 'host', 'busybox', 'ip', '-o', 'link']);
    assert.match(host, new RegExp(`: ${engine.bridge}:`));
    await engine.dockerOk(['run', '-d', '--name', 'owner', 'busybox', 'sleep', '300']);
    const ownerIp = (await inspect('owner')).NetworkSettings.IPAddress;
    const joined = await engine.dockerOk([
      'run',
      '--rm',
      '--network',
      'container:owner',
      'busybox',
      'ip',
      '-4',
      'addr',
      'show',
      'eth0',
    ]);
    assert.match(joined, new RegExp(`inet ${ownerIp.replaceAll('.', '\\.')}/`));
    const cid = await engine.dockerOk(['create', '--network', 'container:owner', 'busybox', 'true']);
    const ci = await inspect(cid);
    assert.equal(ci.NetworkSettings.SandboxID, '');
    assert.deepEqual(ci.NetworkSettings.Networks, {});
    await engine.dockerOk(['rm', cid]);
    await engine.dockerOk(['run', '-d', '--name', 'nonerun', '--network', 'none', 'busybox', 'sleep', '300']);
    const nr = (await inspect('nonerun')).NetworkSettings;
    assert.deepEqual(Object.keys(nr.Networks), ['none']);
    const noneNet = (await engine.request('GET', '/v1.41/networks/none')).json<NetworkInspect>();
    assert.equal(nr.Networks.none?.NetworkID, noneNet.Id);
    assert.match(nr.Networks.none?.EndpointID ?? '', /^[0-9a-f]{64}$/);
    assert.equal(nr.IPAddress, '');
    await engine.dockerOk(['rm', '-f', 'owner', 'nonerun']);
  });

  it('hands out addresses as dockerd: the lowest free one, reused after a removal; the MAC made of it', async () => {
    const a = await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '300']);
    const b = await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '300']);
    const ipA = (await inspect(a)).NetworkSettings.IPAddress;
    const ipB = (await inspect(b)).NetworkSettings.IPAddress;
    await engine.dockerOk(['rm', '-f', a]);
    const c = await engine.dockerOk(['run', '-d', 'busybox', 'sleep', '300']);
    const ns = (await inspect(c)).NetworkSettings;
    // a's address is free again and lower than b's: c gets it, or a lower one another test's
    // removal freed meanwhile (host-local alone would go on past b's)
    const num = (ip: string) => ip.split('.').reduce((n, o) => n * 256 + Number(o), 0);
    assert.ok(num(ipA) < num(ipB), `${ipA} ${ipB}`);
    assert.ok(num(ns.IPAddress) <= num(ipA), `${ns.IPAddress} after ${ipA} ${ipB}`);
    const hex = ns.IPAddress.split('.').map((o) => Number(o).toString(16).padStart(2, '0'));
    assert.equal(ns.MacAddress, `02:42:${hex.join(':')}`);
    assert.match(await engine.dockerOk(['exec', c, 'ip', 'link', 'show', 'eth0']), new RegExp(ns.MacAddress));
    await engine.dockerOk(['rm', '-f', b, c]);
  });

  it('NetworkDisabled: loopback only whatever the mode, on no network, no hosts or resolv.conf of the engine (as dockerd)', async () => {
    const since = Math.floor(Date.now() / 1000);
    const ids: string[] = [];
    for (const mode of ['default', 'host', 'none']) {
      const created = await engine.request('POST', '/v1.41/containers/create', {
        body: {
          Image: 'busybox',
          Cmd: ['sh', '-c', 'ip -o link; cat /etc/hosts /etc/resolv.conf /etc/hostname'],
          NetworkDisabled: true,
          HostConfig: { NetworkMode: mode },
        },
      });
      assert.equal(created.status, 201, created.text());
      const id = created.json<{ Id: string }>().Id;
      ids.push(id);
      assert.deepEqual((await inspect(id)).NetworkSettings.Networks, {}, mode);
      await engine.dockerOk(['start', '-a', id]);
      const out = await engine.dockerOk(['logs', id]);
      const links = out.split('\n').filter((l) => /^\d+: /.test(l));
      assert.deepEqual(
        links.map((l) => l.split(':')[1]?.trim()),
        ['lo'],
        `${mode}: ${out}`,
      );
      // the image's own (empty) /etc/hosts and /etc/resolv.conf; the engine's /etc/hostname (the
      // host's name in host mode, as dockerd)
      assert.doesNotMatch(out, /localhost|nameserver/, mode);
      assert.match(out, new RegExp(`^${mode === 'host' ? hostname() : id.slice(0, 12)}$`, 'm'), mode);
      const after = await inspect(id);
      assert.deepEqual(after.NetworkSettings.Networks, {});
      assert.equal(after.HostsPath, '');
      const listed = await engine.dockerOk(['ps', '-aq', '--no-trunc', '--filter', 'network=bridge']);
      assert.ok(!listed.includes(id), mode);
      await engine.dockerOk(['rm', id]);
    }
    // no network connect/disconnect for them
    const events = await engine.events(since, '{{.Actor.Attributes.container}}', ['type=network']);
    for (const id of ids) assert.ok(!events.includes(id), events);
  });
});

describe('legacy links (docker CLI)', () => {
  let engine: TestEngine;
  const inspect = async (name: string) =>
    (await engine.request('GET', `/v1.41/containers/${name}/json`)).json<Inspect>();
  const create = (body: unknown, name?: string) =>
    engine.request('POST', `/v1.41/containers/create${name ? `?name=${name}` : ''}`, { body });
  const message = (r: { json<T>(): T }) => r.json<{ message: string }>().message;

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
    await engine.dockerOk([
      'run',
      '-d',
      '--name',
      'db',
      '-e',
      'PASSWORD=secret',
      '--expose',
      '5432',
      '--expose',
      '53/udp',
      'busybox',
      'sleep',
      '600',
    ]);
  });
  after(async () => {
    await engine?.destroy();
  });

  it('gives the linked container a hosts entry and variables, and it answers by its alias', async () => {
    const db = await inspect('db');
    const ip = db.NetworkSettings.IPAddress;
    const out = await engine.dockerOk([
      'run',
      '--rm',
      '--name',
      'web',
      '--link',
      'db:pg',
      'busybox',
      'sh',
      '-c',
      'cat /etc/hosts; env | sort; ping -c 1 -W 5 pg >/dev/null && echo reachable',
    ]);
    assert.match(out, new RegExp(`^${ip.replaceAll('.', '\\.')}\\tpg ${db.Config.Hostname} db$`, 'm'));
    for (const line of [
      'PG_NAME=/web/pg',
      // the lowest exposed port (dockerd sorts by number)
      `PG_PORT=udp://${ip}:53`,
      `PG_PORT_5432_TCP=tcp://${ip}:5432`,
      `PG_PORT_5432_TCP_ADDR=${ip}`,
      'PG_PORT_5432_TCP_PORT=5432',
      'PG_PORT_5432_TCP_PROTO=tcp',
      `PG_PORT_53_UDP=udp://${ip}:53`,
      'PG_ENV_PASSWORD=secret',
    ]) {
      assert.ok(out.split('\n').includes(line), `${line} in\n${out}`);
    }
    assert.ok(!out.includes('PG_ENV_PATH='), 'PATH is not passed on');
    assert.match(out, /^reachable$/m);
    // alias = name: the name is not repeated
    const plain = await engine.dockerOk([
      'run',
      '--rm',
      '--link',
      'db',
      'busybox',
      'grep',
      '-w', // the container's own random hostname may hold "db"
      'db',
      '/etc/hosts',
    ]);
    assert.equal(plain, `${ip}\tdb ${db.Config.Hostname}`);
  });

  it('shows links as dockerd: HostConfig.Links /target:/parent/alias, link names in the list and lookups', async () => {
    await engine.dockerOk([
      'run',
      '-d',
      '--name',
      'app',
      '--link',
      'db:pg',
      '--link',
      'db',
      'busybox',
      'sleep',
      '600',
    ]);
    const app = await inspect('app');
    assert.deepEqual(app.HostConfig.Links, ['/db:/app/pg', '/db:/app/db']);
    assert.equal(app.NetworkSettings.Networks.bridge?.Links, null);
    const db = await inspect('db');
    const list = (await engine.request('GET', '/v1.41/containers/json')).json<
      Array<{ Id: string; Names: string[] }>
    >();
    assert.deepEqual(list.find((c) => c.Id === db.Id)?.Names, ['/app/db', '/app/pg', '/db']);
    // a link name resolves to the linked container, as in dockerd
    assert.equal((await inspect('app/pg')).Id, db.Id);
    // docker ps shows the container's own name
    assert.match(
      await engine.dockerOk(['ps', '--format', '{{.Names}}', '--filter', `id=${db.Id}`]),
      /(^|,)db(,|$)/,
    );
    // renaming the parent moves its link names
    await engine.dockerOk(['rename', 'app', 'app2']);
    assert.deepEqual((await inspect('app2')).HostConfig.Links, ['/db:/app2/pg', '/db:/app2/db']);
    assert.equal((await inspect('app2/pg')).Id, db.Id);
    assert.equal((await engine.request('GET', '/v1.41/containers/app/pg/json')).status, 404);
  });

  it('removes one link with DELETE ?link=1 (docker rm --link), hosts file included', async () => {
    const hostsPath = (await inspect('app2')).HostsPath;
    const before = await readFile(hostsPath, 'utf8');
    assert.match(before, /\tpg /);
    await engine.dockerOk(['rm', '--link', 'app2/pg']);
    assert.deepEqual((await inspect('app2')).HostConfig.Links, ['/db:/app2/db']);
    const after = await readFile(hostsPath, 'utf8');
    assert.doesNotMatch(after, /\tpg /);
    assert.match(after, /\tdb /);
    const r = await engine.request('DELETE', '/v1.41/containers/db?link=1');
    assert.equal(r.status, 400);
    assert.equal(message(r), 'Conflict, cannot remove the default link name of the container');
    assert.equal((await engine.request('DELETE', '/v1.41/containers/app2/nope?link=1')).status, 404);
    // the container and the linked one are still there
    assert.equal((await inspect('db')).Name, '/db');
    await engine.dockerOk(['rm', '-f', 'app2']);
    assert.equal((await engine.request('GET', '/v1.41/containers/app2/db/json')).status, 404);
  });

  it("refuses what dockerd refuses, with dockerd's messages", async () => {
    const cases: Array<[unknown, number, string]> = [
      [
        { Image: 'busybox', HostConfig: { Links: ['nope:x'] } },
        400,
        'could not get container for nope: No such container: nope',
      ],
      [{ Image: 'busybox', HostConfig: { Links: ['a:b:c'] } }, 400, 'bad format for links: a:b:c'],
      [{ Image: 'busybox', HostConfig: { Links: [''] } }, 400, 'empty string specified for links'],
      [
        { Image: 'busybox', HostConfig: { Links: [':x'] } },
        400,
        'could not get container for : invalid name or ID supplied: ""',
      ],
      [
        { Image: 'busybox', HostConfig: { Links: ['db:x'], NetworkMode: 'host' } },
        400,
        "conflicting options: host type networking can't be used with links. This would result in undefined behavior",
      ],
      [
        { Image: 'busybox', HostConfig: { Links: ['db:x'], NetworkMode: 'container:db' } },
        400,
        "conflicting options: container type network can't be used with links. This would result in undefined behavior",
      ],
    ];
    for (const [body, status, msg] of cases) {
      const r = await create(body);
      assert.equal(r.status, status, JSON.stringify(body));
      assert.equal(message(r), msg);
    }
    // a link to a container on the host's network
    await engine.dockerOk(['create', '--name', 'hostnet', '--network', 'host', 'busybox', 'true']);
    const r = await create({ Image: 'busybox', HostConfig: { Links: ['hostnet:x'] } });
    assert.equal(r.status, 400);
    assert.match(message(r), /host type networking can't be used with links/);
    // the target must run when the container starts
    await engine.dockerOk(['create', '--name', 'idle', 'busybox', 'true']);
    await engine.dockerOk(['create', '--name', 'needsidle', '--link', 'idle:i', 'busybox', 'true']);
    const start = await engine.request('POST', '/v1.41/containers/needsidle/start');
    assert.equal(start.status, 409);
    assert.equal(message(start), 'Cannot link to a non running container: /idle AS /needsidle/i');
    const st = await inspect('needsidle');
    assert.equal(st.State.Status, 'created');
    // and be on the default bridge
    await engine.dockerOk([
      'run',
      '-d',
      '--name',
      'isolated',
      '--network',
      'none',
      'busybox',
      'sleep',
      '600',
    ]);
    await engine.dockerOk(['create', '--name', 'needsiso', '--link', 'isolated:i', 'busybox', 'true']);
    const start2 = await engine.request('POST', '/v1.41/containers/needsiso/start');
    assert.equal(message(start2), 'Cannot link to /isolated, as it does not belong to the default network');
    // links with --network none are kept but unused, as dockerd does
    await engine.dockerOk([
      'run',
      '--name',
      'nolinks',
      '--network',
      'none',
      '--link',
      'db:x',
      'busybox',
      'true',
    ]);
    assert.deepEqual((await inspect('nolinks')).HostConfig.Links, ['/db:/nolinks/x']);
    await engine.dockerOk(['rm', '-f', 'hostnet', 'idle', 'needsidle', 'isolated', 'needsiso', 'nolinks']);
  });

  it('a link follows its target: new address after a restart, gone with the target', async () => {
    await engine.dockerOk(['run', '-d', '--name', 'tgt', 'busybox', 'sleep', '600']);
    await engine.dockerOk([
      'run',
      '-d',
      '--name',
      'par',
      '--link',
      'tgt:t',
      'busybox',
      'sh',
      '-c',
      'while true; do grep -w t /etc/hosts; sleep 0.2; done',
    ]);
    // another container takes the next address meanwhile, so the target comes back on a new one
    await engine.dockerOk(['stop', '-t', '0', 'tgt']);
    await engine.dockerOk(['run', '-d', '--name', 'filler', 'busybox', 'sleep', '600']);
    await engine.dockerOk(['start', 'tgt']);
    const ip = (await inspect('tgt')).NetworkSettings.IPAddress;
    const hosts = await readFile((await inspect('par')).HostsPath, 'utf8');
    const line = hosts.split('\n').find((l) => l.includes('\tt '));
    assert.equal(line?.split('\t')[0], ip, hosts);
    // and the container itself reads it (the file is rewritten in place, under its bind mount)
    await eventually('the linking container to see the new address', async () =>
      (await engine.dockerOk(['logs', 'par'])).split('\n').some((l) => l.startsWith(`${ip}\tt `)),
    );
    // removing the target leaves the link (dockerd shows it, and refuses to start the parent)
    await engine.dockerOk(['rm', '-f', 'tgt']);
    assert.deepEqual((await inspect('par')).HostConfig.Links, ['/tgt:/par/t']);
    await engine.dockerOk(['stop', '-t', '0', 'par']);
    const start = await engine.request('POST', '/v1.41/containers/par/start');
    assert.equal(message(start), 'Cannot link to a non running container: /tgt AS /par/t');
    await engine.dockerOk(['rm', '-f', 'par', 'filler']);
  });
});
