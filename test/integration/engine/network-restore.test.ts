import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { eventually } from '../../helpers/eventually.js';
import { startAll } from '../../helpers/start-all.js';

const exec = promisify(execFile);

/** The default bridge across engine restarts (kill -9 included), engines side by side, flags. */

interface NetworkSettings {
  SandboxID: string;
  SandboxKey: string;
  IPAddress: string;
  Gateway: string;
  Networks: Record<string, { NetworkID: string; IPAddress: string }>;
}

interface BridgeNetwork {
  Id: string;
  IPAM: { Config: Array<{ Subnet: string; Gateway?: string }> };
  Containers: Record<string, { IPv4Address: string }>;
}

const natRules = async () => (await exec('iptables', ['-w', '-t', 'nat', '-S'])).stdout;
const forwardRules = async () => (await exec('iptables', ['-w', '-S'])).stdout;
const linkExists = async (name: string) =>
  exec('ip', ['link', 'show', 'dev', name]).then(
    () => true,
    () => false,
  );

describe('default bridge across engine restarts', () => {
  let engine: TestEngine;
  const settings = async (name: string) =>
    (await engine.request('GET', `/v1.41/containers/${name}/json`)).json<{
      NetworkSettings: NetworkSettings;
    }>().NetworkSettings;
  const bridgeNet = async () => (await engine.request('GET', '/v1.41/networks/bridge')).json<BridgeNetwork>();
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

  before(async () => {
    engine = await TestEngine.start();
    await ensureBusybox(engine);
  });
  after(async () => {
    await engine?.destroy();
  });

  it('keeps a running container on its address through kill -9 and a restart of the engine', async () => {
    await engine.dockerOk([
      'run',
      '-d',
      '--name',
      'server',
      'busybox',
      'sh',
      '-c',
      // stdin held open: busybox nc may leave at /dev/null's EOF before reading what was sent
      'while true; do sleep 60 | nc -l -p 8080; done',
    ]);
    const before = await settings('server');
    const net = await bridgeNet();

    await engine.kill9();
    await engine.launch();

    const now = await settings('server');
    assert.equal(now.IPAddress, before.IPAddress);
    assert.equal(now.SandboxID, before.SandboxID);
    assert.ok(existsSync(now.SandboxKey));
    assert.ok(existsSync(ipamFile(now.IPAddress)));
    const after = await bridgeNet();
    assert.equal(after.Id, net.Id);
    // as dockerd's docker0 after a restart: the bridge had its address, so it shows as the gateway
    assert.deepEqual(after.IPAM.Config, [{ ...net.IPAM.Config[0], Gateway: before.Gateway }]);
    assert.ok(after.Containers[await engine.dockerOk(['inspect', '-f', '{{.Id}}', 'server'])]);
    // still reachable, from a container started by the new engine process
    await engine.dockerOk([
      'run',
      '--rm',
      'busybox',
      'sh',
      '-c',
      `echo after-the-crash | nc -w 5 ${now.IPAddress} 8080`,
    ]);
    await eventually(
      'the server to get the message',
      async () => (await engine.dockerOk(['logs', 'server'])).includes('after-the-crash'),
      15_000,
    );
    // and released as usual when it stops
    await engine.dockerOk(['stop', '-t', '0', 'server']);
    await eventually('the address to be released', () => released(now.IPAddress, now.SandboxID), 15_000);
    await eventually('the namespace to be removed', () => !existsSync(now.SandboxKey), 15_000);
    await engine.dockerOk(['rm', 'server']);
  });

  it('releases the network of a container that died while the engine was down', async () => {
    const id = await engine.dockerOk(['run', '-d', '--name', 'doomed', 'busybox', 'sleep', '600']);
    const ns = await settings('doomed');
    assert.ok(existsSync(ipamFile(ns.IPAddress)) && existsSync(ns.SandboxKey));
    // the engine's runtime (crun by default, runc where crun cannot run)
    const rt = existsSync(join(engine.execRoot, 'crun', id)) ? 'crun' : 'runc';
    await engine.kill9();
    await exec(rt, ['--root', join(engine.execRoot, rt), 'kill', id, 'KILL']);
    await eventually(
      'the container to be gone',
      async () => {
        const r = await exec(rt, ['--root', join(engine.execRoot, rt), 'state', id]).catch(() => undefined);
        return !r || /"status": "stopped"/.test(r.stdout);
      },
      15_000,
    );
    await engine.launch();
    assert.equal(await engine.dockerOk(['inspect', '-f', '{{.State.Status}}', 'doomed']), 'exited');
    assert.equal((await settings('doomed')).IPAddress, '');
    await eventually('the address to be released', () => released(ns.IPAddress, ns.SandboxID), 15_000);
    await eventually('the namespace to be removed', () => !existsSync(ns.SandboxKey), 15_000);
    await engine.dockerOk(['rm', 'doomed']);
  });

  it('sweeps sandboxes and addresses nobody holds at engine start', async () => {
    await engine.stop();
    // what a crash between creating a sandbox and recording it leaves: a namespace, an address
    const orphan = 'f'.repeat(64);
    const nsPath = join(engine.execRoot, 'netns', orphan.slice(0, 12));
    await mkdir(join(engine.execRoot, 'netns'), { recursive: true });
    await writeFile(nsPath, '');
    await exec('unshare', [`--net=${nsPath}`, 'true']);
    const subnet = (await bridgeNetFromDisk(engine)).split('/')[0] ?? '';
    const ip = subnet.replace(/\.0$/, '.250');
    await writeFile(ipamFile(ip), `${orphan}\r\neth0`);
    const stray = join(engine.execRoot, 'netns', 'abcdefabcdef');
    await writeFile(stray, '');
    await engine.launch();
    await eventually('the orphaned address to be released', () => !existsSync(ipamFile(ip)), 15_000);
    await eventually(
      'the orphaned namespace to be removed',
      () => !existsSync(nsPath) && !existsSync(stray),
      15_000,
    );
  });
});

/** The engine's subnet from its networks.json (while it is stopped). */
async function bridgeNetFromDisk(engine: TestEngine): Promise<string> {
  const saved = JSON.parse(await readFile(join(engine.dataRoot, 'network', 'networks.json'), 'utf8')) as {
    bridge: { subnet: string };
  };
  return saved.bridge.subnet;
}

describe('engines side by side, --bip and --bridge none', () => {
  it('gives engines started together different blocks, and destroy leaves nothing on the host', async () => {
    const [a, b] = await startAll([TestEngine.start(), TestEngine.start()]);
    try {
      const subnet = async (e: TestEngine) =>
        (await e.request('GET', '/v1.41/networks/bridge')).json<BridgeNetwork>().IPAM.Config[0]?.Subnet;
      const [sa, sb] = await Promise.all([subnet(a), subnet(b)]);
      assert.ok(sa && sb);
      assert.notEqual(sa, sb);
      assert.ok(await linkExists(a.bridge));
      assert.ok(await linkExists(b.bridge));
      assert.match(await forwardRules(), new RegExp(`-i ${a.bridge} `));
      assert.match(await natRules(), new RegExp(`-s ${sa} ! -o ${a.bridge} .*-j MASQUERADE`));
      assert.match(await natRules(), new RegExp(`-s ${sb} ! -o ${b.bridge} .*-j MASQUERADE`));
    } finally {
      await Promise.all([a.destroy(), b.destroy()]);
    }
    for (const e of [a, b]) {
      assert.equal(await linkExists(e.bridge), false, `${e.bridge} removed`);
      assert.doesNotMatch(await forwardRules(), new RegExp(`berth bridge ${e.bridge}"`));
      assert.doesNotMatch(await natRules(), new RegExp(`berth bridge ${e.bridge}"`));
    }
  });

  it('uses the block --bip gives, and keeps it across restarts', async () => {
    const e = await TestEngine.start({ bip: '10.213.7.1/24' });
    try {
      await ensureBusybox(e);
      const net = (await e.request('GET', '/v1.41/networks/bridge')).json<BridgeNetwork>();
      assert.deepEqual(net.IPAM.Config, [{ Subnet: '10.213.7.0/24', Gateway: '10.213.7.1' }]);
      const out = await e.dockerOk(['run', '--rm', 'busybox', 'ip', '-4', '-o', 'addr', 'show', 'eth0']);
      assert.match(out, /inet 10\.213\.7\.\d+\/24/);
      await e.restart();
      const again = (await e.request('GET', '/v1.41/networks/bridge')).json<BridgeNetwork>();
      assert.equal(again.Id, net.Id);
      assert.deepEqual(again.IPAM.Config, net.IPAM.Config);
    } finally {
      await e.destroy();
    }
  });

  it('runs without a default bridge with --bridge none: loopback only', async () => {
    const e = await TestEngine.start({ bridge: 'none' });
    try {
      await ensureBusybox(e);
      const links = await e.dockerOk(['run', '--rm', 'busybox', 'ip', '-o', 'link']);
      assert.deepEqual(
        links.split('\n').map((l) => l.split(':')[1]?.trim()),
        ['lo'],
      );
      const ls = await e.dockerOk(['network', 'ls', '--format', '{{.Name}}']);
      assert.deepEqual(ls.split('\n').sort(), ['host', 'none']);
      await e.dockerOk(['run', '-d', '--name', 'lonely', 'busybox', 'sleep', '300']);
      const ns = (await e.request('GET', '/v1.41/containers/lonely/json')).json<{
        NetworkSettings: NetworkSettings;
      }>().NetworkSettings;
      assert.deepEqual(Object.keys(ns.Networks), ['none']);
      const r = await e.request('POST', '/v1.41/containers/create', {
        body: { Image: 'busybox', HostConfig: { NetworkMode: 'bridge' } },
      });
      assert.equal(r.status, 400); // not 404: the CLI would go and pull the image
      assert.equal(r.json<{ message: string }>().message, 'network bridge not found');
    } finally {
      await e.destroy();
    }
  });
});
