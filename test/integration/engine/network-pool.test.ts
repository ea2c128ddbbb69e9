import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { formatIpv4, parseCidr } from '../../../src/engine/network/ipv4.js';
import { POOL_SIZE } from '../../../src/engine/network/sandbox-pool.js';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { eventually } from '../../helpers/eventually.js';

const exec = promisify(execFile);

/**
 * Sandboxes plumbed ahead (docs/networking.md, "Sandboxes made ahead"): a start on a busy bridge
 * network gets a namespace already joined to the bridge, with the address, MAC, routes, DNS names
 * and events it would have had without the pool; addresses and names are reusable right after
 * `rm`; a kill -9 with pooled sandboxes leaves nothing once the engine is back; a network's
 * pooled sandboxes go with it.
 */

interface Inspect {
  Id: string;
  NetworkSettings: {
    SandboxKey: string;
    IPAddress: string;
    MacAddress: string;
    Gateway: string;
    Networks: Record<string, { IPAddress: string; MacAddress: string; Gateway: string }>;
  };
}

describe('network sandboxes made ahead', () => {
  let engine: TestEngine;
  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
  });
  after(async () => {
    await engine?.destroy();
  });

  const inspect = async (c: string): Promise<Inspect> =>
    (JSON.parse(await engine.dockerOk(['inspect', c])) as Inspect[])[0] as Inspect;
  const netnsFiles = async () => {
    const dir = join(engine.execRoot, 'netns');
    return existsSync(dir) ? (await readdir(dir)).sort() : [];
  };
  const leases = async (bridge: string) => {
    const dir = join(engine.dataRoot, 'network', 'ipam', bridge);
    return existsSync(dir) ? (await readdir(dir)).filter((f) => /^[0-9.]+$/.test(f)).sort() : [];
  };
  const veths = async (bridge: string) =>
    (await exec('ip', ['-o', 'link', 'show', 'master', bridge]).catch(() => ({ stdout: '' }))).stdout
      .split('\n')
      .filter(Boolean);
  const netnsMounts = async () =>
    (await readFile('/proc/self/mountinfo', 'utf8'))
      .split('\n')
      .map((l) => l.split(' ')[4] ?? '')
      .filter((t) => t.startsWith(`${join(engine.execRoot, 'netns')}/`));
  /** The `n`th host address of a block (`172.18.0.0/16`, 2 -> `172.18.0.2`). */
  const nth = (subnet: string, n: number) => formatIpv4((parseCidr(subnet)?.ip ?? 0) + n);
  const mac = (ip: string) =>
    ['02', '42', ...ip.split('.').map((b) => Number(b).toString(16).padStart(2, '0'))].join(':');
  /** A network's first IPAM subnet, as `docker network inspect` shows it. */
  const subnetOf = (network: string) =>
    engine.dockerOk(['network', 'inspect', '-f', '{{(index .IPAM.Config 0).Subnet}}', network]);
  const run = (...args: string[]) => engine.dockerOk(['run', '-d', ...args, 'busybox', 'sleep', '600']);

  it('hands a start on the default bridge a pooled sandbox with the address, MAC and routes IPAM gives', async () => {
    const subnet = await subnetOf('bridge');
    const since = Math.floor(Date.now() / 1000);
    await run('--name', 'p1');
    const p1 = await inspect('p1');
    assert.equal(p1.NetworkSettings.IPAddress, nth(subnet, 2));
    // the pool fills: the next addresses, each in a namespace joined to the bridge
    await eventually('the pool to fill', async () => (await leases(engine.bridge)).length === 1 + POOL_SIZE);
    assert.deepEqual(await leases(engine.bridge), [2, 3, 4].map((n) => nth(subnet, n)).sort());
    assert.equal((await veths(engine.bridge)).length, 1 + POOL_SIZE);
    const pooled = (await netnsFiles()).filter((f) => f !== basename(p1.NetworkSettings.SandboxKey));
    assert.ok(pooled.length >= POOL_SIZE, `pooled namespaces: ${pooled.join(' ')}`);

    await run('--name', 'p2');
    const p2 = await inspect('p2');
    assert.ok(pooled.includes(basename(p2.NetworkSettings.SandboxKey)), 'a pooled namespace was handed over');
    const ip = nth(subnet, 3);
    assert.equal(p2.NetworkSettings.IPAddress, ip);
    assert.equal(p2.NetworkSettings.MacAddress, mac(ip));
    assert.equal(p2.NetworkSettings.Networks.bridge?.IPAddress, ip);
    assert.equal(p2.NetworkSettings.Gateway, nth(subnet, 1));
    // what the container sees is what inspect says
    const addr = await engine.dockerOk(['exec', 'p2', 'ip', '-o', '-4', 'addr', 'show', 'eth0']);
    assert.match(addr, new RegExp(` ${ip.replaceAll('.', '\\.')}/16 `));
    assert.equal(await engine.dockerOk(['exec', 'p2', 'cat', '/sys/class/net/eth0/address']), mac(ip));
    assert.match(
      await engine.dockerOk(['exec', 'p2', 'ip', 'route']),
      new RegExp(`default via ${nth(subnet, 1)}`),
    );
    assert.match(await engine.dockerOk(['exec', 'p2', 'cat', '/etc/hosts']), new RegExp(`^${ip}\\s`, 'm'));
    assert.equal((await engine.docker(['exec', 'p2', 'ping', '-c', '1', '-W', '2', nth(subnet, 2)])).code, 0);
    // the events are a start's
    const connects = await engine.events(since, '{{.Action}} {{.Actor.Attributes.container}}', [
      'type=network',
    ]);
    assert.ok(connects.split('\n').includes(`connect ${p2.Id}`), connects);

    // a MAC of its own: not a pooled sandbox's, but the address IPAM gives
    await run('--name', 'p3', '--mac-address', '02:00:00:00:00:42');
    const p3 = await inspect('p3');
    assert.equal(p3.NetworkSettings.IPAddress, nth(subnet, 4));
    assert.equal(p3.NetworkSettings.MacAddress, '02:00:00:00:00:42');
    assert.equal(
      await engine.dockerOk(['exec', 'p3', 'cat', '/sys/class/net/eth0/address']),
      '02:00:00:00:00:42',
    );
  });

  it('lets a name and an address be used again right after rm', async () => {
    const subnet = await subnetOf('bridge');
    for (let i = 0; i < 3; i++) {
      await engine.dockerOk(['rm', '-f', 'p1']);
      await run('--name', 'p1');
      assert.equal((await inspect('p1')).NetworkSettings.IPAddress, nth(subnet, 2), `round ${i}`);
    }
    // a static address on a user-defined network, the same right after rm
    await engine.dockerOk(['network', 'create', 'again']);
    const block = await subnetOf('again');
    // (a picked block takes no --ip, as dockerd: a network with the same block given)
    await engine.dockerOk(['network', 'rm', 'again']);
    await engine.dockerOk(['network', 'create', '--subnet', block, 'again']);
    const fixed = nth(block, 9);
    for (let i = 0; i < 3; i++) {
      await run('--name', 'fixed', '--network', 'again', '--ip', fixed);
      assert.equal((await inspect('fixed')).NetworkSettings.Networks.again?.IPAddress, fixed);
      await engine.dockerOk(['rm', '-f', 'fixed']);
    }
    await engine.dockerOk(['network', 'rm', 'again']);
  });

  it('serves a busy user-defined network: DNS names as without the pool; its pooled sandboxes go with it', async () => {
    await engine.dockerOk(['network', 'create', 'busy']);
    const id = await engine.dockerOk(['network', 'inspect', '-f', '{{.Id}}', 'busy']);
    const bridge = `br-${id.slice(0, 12)}`;
    const block = await subnetOf('busy');
    await run('--name', 'u1', '--network', 'busy');
    await run('--name', 'u2', '--network', 'busy');
    await eventually('the pool to fill', async () => (await leases(bridge)).length === 2 + POOL_SIZE);
    const before = await netnsFiles();
    await run('--name', 'u3', '--network', 'busy', '--network-alias', 'third');
    const u3 = await inspect('u3');
    assert.ok(before.includes(basename(u3.NetworkSettings.SandboxKey)), 'a pooled namespace was handed over');
    const ip = nth(block, 4);
    assert.equal(u3.NetworkSettings.Networks.busy?.IPAddress, ip);
    assert.equal(u3.NetworkSettings.Networks.busy?.MacAddress, mac(ip));
    for (const name of ['u3', 'third', u3.Id.slice(0, 12)]) {
      const r = await engine.docker(['exec', 'u1', 'nslookup', '-type=a', name]);
      const names = await engine.dockerOk([
        'inspect',
        '-f',
        '{{json .NetworkSettings.Networks.busy.DNSNames}}',
        'u3',
      ]);
      assert.equal(r.code, 0, `nslookup ${name}: ${r.stdout} ${r.stderr} (DNSNames ${names})`);
      const ns = r.stdout;
      assert.match(ns, new RegExp(`Address:\\s*${ip.replaceAll('.', '\\.')}`), name);
    }
    const containers = await engine.dockerOk(['network', 'inspect', '-f', '{{json .Containers}}', 'busy']);
    assert.match(containers, new RegExp(`"${u3.Id}":\\{[^}]*"IPv4Address":"${ip.replaceAll('.', '\\.')}/`));
    await engine.dockerOk(['rm', '-f', 'u1', 'u2', 'u3']);
    await engine.dockerOk(['network', 'rm', 'busy']);
    assert.deepEqual(await veths(bridge), []);
    // nothing of the network's is left: the namespaces are the default bridge's (its containers,
    // its pool) and at most the next start's bare one
    const after = await netnsFiles();
    assert.ok(after.length <= (await leases(engine.bridge)).length + 1, `left: ${after.join(' ')}`);
    assert.equal(existsSync(join(engine.dataRoot, 'network', 'ipam', bridge)), false);
  });

  it('leaves nothing of its pooled sandboxes after a kill -9 once the engine is back; the same addresses', async () => {
    const subnet = await subnetOf('bridge');
    await engine.dockerOk(['rm', '-f', 'p1', 'p2', 'p3']);
    // the pool holds the lowest free addresses again
    await eventually(
      'the pool on the lowest addresses',
      async () =>
        (await leases(engine.bridge)).join() ===
        [2, 3]
          .map((n) => nth(subnet, n))
          .sort()
          .join(),
    );
    assert.ok((await netnsMounts()).length >= POOL_SIZE);
    assert.ok((await veths(engine.bridge)).length >= POOL_SIZE);
    await engine.kill9();
    await engine.launch();
    await eventually(
      'the sweep to remove the pooled sandboxes',
      async () =>
        (await leases(engine.bridge)).length === 0 &&
        (await veths(engine.bridge)).length === 0 &&
        (await netnsMounts()).length === 0 &&
        (await netnsFiles()).length === 0,
    );
    await run('--name', 'k1');
    assert.equal((await inspect('k1')).NetworkSettings.IPAddress, nth(subnet, 2));
    await engine.dockerOk(['rm', '-f', 'k1']);
  });

  it('drains the pool at engine shutdown', async () => {
    await run('--name', 's1');
    await eventually('the pool to fill', async () => (await leases(engine.bridge)).length === 1 + POOL_SIZE);
    await engine.dockerOk(['rm', '-f', 's1']);
    await engine.stop();
    assert.deepEqual(await leases(engine.bridge), []);
    // a namespace's veth goes when the kernel has freed the namespace, a moment after its unmount
    await eventually(
      'the veths to go with their namespaces',
      async () => (await veths(engine.bridge)).length === 0,
    );
    assert.deepEqual(await netnsMounts(), []);
    assert.deepEqual(await netnsFiles(), []);
  });
});
