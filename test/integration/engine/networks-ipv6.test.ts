import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { eventually } from '../../helpers/eventually.js';

const exec = promisify(execFile);

/**
 * IPv6 on user-defined bridge networks through the docker CLI, as dockerd 20.10 does it
 * (`network create --ipv6 --subnet fdxx::/64`): the bridge's IPv6 gateway, addresses from IPAM or
 * `--ip6`, the default route, inspect's fields, AAAA answers of the engine's DNS, traffic and
 * isolation over IPv6, published ports on `[::1]`, and nothing left after removal or a kill -9.
 */

interface EndpointView {
  IPAMConfig: { IPv6Address?: string } | null;
  IPAddress: string;
  GlobalIPv6Address: string;
  GlobalIPv6PrefixLen: number;
  IPv6Gateway: string;
}

const ip6tablesSave = async () => (await exec('ip6tables-save')).stdout;
const links = async () => (await exec('ip', ['-o', 'link', 'show'])).stdout;
const canBind = (host: string) =>
  new Promise<boolean>((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen({ host, port: 0 }, () => s.close(() => resolve(true)));
  });

/** A unique-local /64 of the test's own (engines of other suites run beside it). */
const ula = () => {
  const group = () => ((randomBytes(2).readUInt16BE(0) % 0xfff) + 1).toString(16);
  return `fd${randomBytes(1).toString('hex')}:${group()}:${group()}:1`;
};

describe('IPv6 on user-defined networks (docker CLI)', () => {
  let engine: TestEngine;
  const p1 = ula();
  const p2 = ula();

  const endpoint = async (c: string, network: string) => {
    const r = await engine.request('GET', `/v1.41/containers/${c}/json`);
    assert.equal(r.status, 200, r.text());
    const view = r.json<{ NetworkSettings: { Networks: Record<string, EndpointView> } }>();
    const ep = view.NetworkSettings.Networks[network];
    assert.ok(ep, `${c} is on ${network}`);
    return ep;
  };
  const bridgeOf = async (network: string) =>
    `br-${(await engine.dockerOk(['network', 'inspect', '-f', '{{.Id}}', network])).slice(0, 12)}`;
  const get = (from: string, host: string) =>
    engine.docker(['exec', from, 'sh', '-c', `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 ${host} 8080`]);

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
  });

  after(async () => {
    await engine?.destroy();
  });

  it('gives containers IPv6 addresses, routes, names and traffic on an --ipv6 network', async () => {
    await engine.dockerOk(['network', 'create', '--ipv6', '--subnet', `${p1}::/64`, 'six']);
    const bridge = await bridgeOf('six');
    const net = JSON.parse(await engine.dockerOk(['network', 'inspect', '-f', '{{json .}}', 'six'])) as {
      EnableIPv6: boolean;
      IPAM: { Config: Array<{ Subnet: string; Gateway?: string }> };
    };
    assert.equal(net.EnableIPv6, true);
    // an IPv4 block from the default pools beside it (dockerd's), the IPv6 one as given
    assert.equal(net.IPAM.Config.length, 2);
    assert.deepEqual(net.IPAM.Config[1], { Subnet: `${p1}::/64` });
    const addr = await exec('ip', ['-6', '-o', 'addr', 'show', 'dev', bridge]);
    assert.match(addr.stdout, new RegExp(`inet6 ${p1}::1/64`), 'the bridge holds the IPv6 gateway');

    await engine.dockerOk([
      'run',
      '-d',
      '--name',
      'srv6',
      '--network',
      'six',
      '--ip6',
      `${p1}::99`,
      'busybox',
      'sh',
      '-c',
      'mkdir -p /www && echo hello > /www/index.html && exec httpd -f -p 8080 -h /www',
    ]);
    await engine.dockerOk(['run', '-d', '--name', 'cli6', '--network', 'six', 'busybox', 'sleep', '600']);
    const srv = await endpoint('srv6', 'six');
    assert.equal(srv.GlobalIPv6Address, `${p1}::99`);
    assert.deepEqual(srv.IPAMConfig, { IPv6Address: `${p1}::99` });
    const cli = await endpoint('cli6', 'six');
    assert.equal(cli.GlobalIPv6Address, `${p1}::2`, "dockerd's IPAM: the lowest free address");
    assert.equal(cli.GlobalIPv6PrefixLen, 64);
    assert.equal(cli.IPv6Gateway, `${p1}::1`);
    const members = JSON.parse(
      await engine.dockerOk(['network', 'inspect', '-f', '{{json .Containers}}', 'six']),
    ) as Record<string, { Name: string; IPv6Address: string }>;
    assert.deepEqual(
      Object.values(members)
        .map((m) => `${m.Name} ${m.IPv6Address}`)
        .sort(),
      [`cli6 ${p1}::2/64`, `srv6 ${p1}::99/64`],
    );

    const route = await engine.dockerOk(['exec', 'cli6', 'ip', '-6', 'route', 'show', 'default']);
    assert.match(route, new RegExp(`default via ${p1}::1 dev eth0`));
    assert.equal(
      await engine.dockerOk(['exec', 'cli6', 'cat', '/proc/sys/net/ipv6/conf/eth0/disable_ipv6']),
      '0',
    );
    const hosts = await engine.dockerOk(['exec', 'cli6', 'cat', '/etc/hosts']);
    assert.match(hosts, new RegExp(`^${p1}::2\\t`, 'm'), 'its own IPv6 line in /etc/hosts');
    const aaaa = await engine.dockerOk(['exec', 'cli6', 'nslookup', '-type=aaaa', 'srv6']);
    assert.match(aaaa, new RegExp(`Address:\\s*${p1}::99`), aaaa);
    // traffic over IPv6 on the bridge, by address and by name
    const byAddress = await get('cli6', `${p1}::99`);
    assert.match(byAddress.stdout, /hello/, byAddress.stderr);
    const ping = await engine.docker(['exec', 'cli6', 'ping', '-6', '-c', '1', '-W', '2', 'srv6']);
    assert.equal(ping.code, 0, ping.stdout + ping.stderr);
  });

  it('refuses what dockerd refuses: --ip6 outside the block, taken, or on a network without IPv6', async () => {
    const outside = await engine.docker([
      'run',
      '--rm',
      '--network',
      'six',
      '--ip6',
      `${p2}::5`,
      'busybox',
      'true',
    ]);
    assert.notEqual(outside.code, 0);
    assert.match(outside.stderr, /does not belong to any of this network's subnets/);
    const taken = await engine.docker([
      'run',
      '--rm',
      '--network',
      'six',
      '--ip6',
      `${p1}::99`,
      'busybox',
      'true',
    ]);
    assert.match(taken.stderr, /Address already in use/);
    await engine.dockerOk(['network', 'create', 'plain4']);
    const noV6 = await engine.docker([
      'run',
      '--rm',
      '--network',
      'plain4',
      '--ip6',
      `${p1}::7`,
      'busybox',
      'true',
    ]);
    assert.match(
      noV6.stderr,
      /user specified IP address is supported only when connecting to networks with user configured subnets/,
    );
    const onBridge = await engine.docker(['run', '--rm', '--ip6', `${p1}::7`, 'busybox', 'true']);
    assert.match(onBridge.stderr, /user specified IP address is supported on user defined networks only/);
    const overlap = await engine.docker(['network', 'create', '--ipv6', '--subnet', `${p1}::/80`, 'clash']);
    assert.match(overlap.stderr, /Pool overlaps with other one on this address space/);
    const none = await engine.docker(['network', 'create', '--ipv6', 'nov6']);
    assert.match(none.stderr, /could not find an available, non-overlapping IPv6 address pool/);
    // without IPv6 on it, the container has none (as on the default bridge)
    const plain = await engine.dockerOk([
      'run',
      '--rm',
      '--network',
      'plain4',
      'busybox',
      'ip',
      '-o',
      'addr',
    ]);
    assert.doesNotMatch(plain, /inet6/);
    await engine.dockerOk(['network', 'rm', 'plain4']);
  });

  it('isolates IPv6 networks from each other with ip6tables', async () => {
    await engine.dockerOk(['network', 'create', '--ipv6', '--subnet', `${p2}::/64`, 'six2']);
    const [b1, b2] = [await bridgeOf('six'), await bridgeOf('six2')];
    const rules = await ip6tablesSave();
    for (const b of [b1, b2]) assert.match(rules, new RegExp(`-A BERTH-ISOLATION-STAGE-2 -o ${b} .*-j DROP`));
    await engine.dockerOk(['run', '-d', '--name', 'far6', '--network', 'six2', 'busybox', 'sleep', '600']);
    const r = await get('far6', `${p1}::99`);
    assert.doesNotMatch(r.stdout, /hello/, 'another network cannot reach the server over IPv6');
    await engine.dockerOk(['rm', '-f', 'far6']);
  });

  it('publishes a port on [::1] (dockerd: its proxy) and lets it go', async () => {
    // Debian 12 has ::1 on lo: a host without it fails here rather than passing untested
    assert.ok(await canBind('::1'), 'no IPv6 loopback (::1) on this host');
    await engine.dockerOk([
      'run',
      '-d',
      '--name',
      'pub6',
      '--network',
      'six',
      '-p',
      '[::1]::8080',
      'busybox',
      'sh',
      '-c',
      'mkdir -p /www && echo hello6 > /www/index.html && exec httpd -f -p 8080 -h /www',
    ]);
    const port = await engine.dockerOk(['port', 'pub6', '8080/tcp']);
    assert.match(port, /^\[::1\]:\d+$/);
    const url = `http://${port}/`;
    await eventually('the published port answers', async () => {
      const r = await exec('curl', ['-s', '-m', '3', url]).catch(() => ({ stdout: '' }));
      return r.stdout.includes('hello6');
    });
    await engine.dockerOk(['rm', '-f', 'pub6']);
    await eventually('the port is free again', async () => {
      const r = await exec('curl', ['-s', '-m', '1', url]).catch(() => ({ stdout: '' }));
      return r.stdout === '';
    });
  });

  it('keeps IPv6 across a kill -9 and leaves nothing once removed', async () => {
    const [b1, b2] = [await bridgeOf('six'), await bridgeOf('six2')];
    await engine.kill9();
    await engine.launch();
    assert.equal((await endpoint('cli6', 'six')).GlobalIPv6Address, `${p1}::2`);
    assert.match((await get('cli6', `${p1}::99`)).stdout, /hello/, 'traffic survives');
    await engine.dockerOk(['rm', '-f', 'srv6', 'cli6']);
    // the address goes back to the pool
    await engine.dockerOk(['run', '-d', '--name', 'again6', '--network', 'six', 'busybox', 'sleep', '600']);
    assert.equal((await endpoint('again6', 'six')).GlobalIPv6Address, `${p1}::2`);
    await engine.dockerOk(['rm', '-f', 'again6']);
    await engine.dockerOk(['network', 'rm', 'six', 'six2']);
    await eventually('the bridges gone', async () => {
      const l = await links();
      return !l.includes(b1) && !l.includes(b2);
    });
    const rules = await ip6tablesSave();
    assert.doesNotMatch(rules, new RegExp(`${b1}|${b2}`));
    const leases = await exec('find', [`${engine.dataRoot}/network/ipam`, '-type', 'f', '-name', `${p1}*`]);
    assert.equal(leases.stdout.trim(), '', 'no IPv6 lease left');
  });
});
