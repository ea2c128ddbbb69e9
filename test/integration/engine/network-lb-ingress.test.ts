import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { NftIngressMesh } from '../../../src/engine/network/lb/ingress-mesh.js';
import type { IngressPort } from '../../../src/engine/network/lb/lb.types.js';
import { HostNftOps } from '../../../src/engine/network/lb/nft.ops.js';
import { nodeScript, requireTool } from '../../helpers/process.js';
import { LbNetwork, tally } from './network-lb-fixture.js';

const repoRoot = resolve(import.meta.dirname, '../../..');

/**
 * The ingress routing mesh on a stand-in node (network-lb-fixture.ts): a "host" namespace, the
 * ingress sandbox made by the mesh and plugged into the stand-in overlay as the overlay code
 * plugs it, three tasks behind it. A published port answers on the host's address, on
 * 127.0.0.1 and from a client outside, spread over the tasks; remove() and a kill -9 followed by
 * a new engine's cleanup leave no table, link, mount or namespace.
 */
describe('ingress routing mesh', () => {
  let net: LbNetwork;
  let dir = '';
  const nft = new HostNftOps();
  let ports: IngressPort[] = [];
  /** The engine process of the kill -9 test. */
  let engine: ChildProcess | undefined;

  before(async () => {
    requireTool('nft', "bash scripts/install-deps.sh installs Debian's nftables");
    net = await LbNetwork.create(3);
    dir = await mkdtemp(join(tmpdir(), 'berth-lb-'));
    const all = [1, 2, 3].map((i) => net.taskIp(i));
    ports = [
      { protocol: 'tcp', publishedPort: 8080, targetPort: 80, backends: all },
      { protocol: 'udp', publishedPort: 5300, targetPort: 5353, backends: all },
      { protocol: 'tcp', publishedPort: 8081, targetPort: 80, backends: [] },
    ];
  });
  after(async () => {
    try {
      if (engine?.pid && engine.exitCode === null && engine.signalCode === null) engine.kill('SIGKILL');
      // what a failed test left: the meshes' namespaces are mounts under dir
      if (net && dir)
        for (const name of ['ingA', 'ingB'])
          await mesh(name)
            .remove()
            .catch(() => undefined);
    } finally {
      await net?.destroy();
      if (dir) await rm(dir, { recursive: true, force: true });
    }
  });

  function mesh(name: string): NftIngressMesh {
    return new NftIngressMesh({
      sandboxPath: join(dir, 'netns', name),
      hostNetns: net.path(net.host),
      hostLink: `${name}0`,
    });
  }

  /** Whether TCP `port` can be bound on the host: `free` or the error's code. */
  async function bindProbe(port: number): Promise<string> {
    const probe = `require('node:net').createServer().on('error', (e) => { console.log(e.code); process.exit(0); })
      .listen(${port}, '0.0.0.0', () => { console.log('free'); process.exit(0); });`;
    return (await net.exec(net.host, [process.execPath, '-e', probe])).stdout.trim();
  }

  /** Nothing of the mesh `name` is left on the host. */
  async function assertGone(name: string): Promise<void> {
    const path = join(dir, 'netns', name);
    const tables = await nft.tables(net.path(net.host));
    assert.deepEqual(
      tables.filter((t) => !/^ip (filter|nat|raw)$/.test(t)),
      [],
      'no nft table of the mesh on the host (iptables-nft has its own)',
    );
    const forward = await net.exec(net.host, ['iptables', '-w', '-S', 'FORWARD']);
    assert.doesNotMatch(forward.stdout, /berth ingress/, 'no FORWARD rule');
    const link = await net.exec(net.host, ['ip', 'link', 'show', `${name}0`]);
    assert.notEqual(link.code, 0, 'no host link');
    await assert.rejects(stat(path), 'no namespace file');
    assert.ok(!(await readFile('/proc/self/mountinfo', 'utf8')).includes(path), 'no mount');
    // the namespace itself is gone (the kernel tears it down in the background): its end of the
    // overlay link goes with it
    let veths = '';
    for (let i = 0; i < 50; i++) {
      veths = (await net.exec(net.ns('ov'), ['ip', '-o', 'link', 'show', 'type', 'veth'])).stdout;
      if (veths.trim().split('\n').length === 3) break;
      await sleep(100);
    }
    assert.equal(veths.trim().split('\n').length, 3, veths);
  }

  it('publishes on every address of the node, loopback included, spread over the tasks', async () => {
    // a node whose forwarding policy is DROP (as dockerd leaves it): the mesh's own rules let it through
    const policy = await net.exec(net.host, ['iptables', '-w', '-P', 'FORWARD', 'DROP']);
    assert.equal(policy.code, 0, policy.stderr);
    const m = mesh('ingA');
    const { sandboxKey } = await m.ensureSandbox();
    await net.attach(sandboxKey, `${net.overlay}.2`, 'eth1');
    await m.apply(ports);
    assert.deepEqual(await m.ensureSandbox(), { sandboxKey }, 'ensureSandbox again: the same sandbox');

    for (const address of ['127.0.0.1', `${net.outside}.1`]) {
      const tcp = await net.requests(net.host, 'tcp', address, 8080, 6);
      assert.deepEqual(tally(tcp), { t1: 2, t2: 2, t3: 2 }, `${address}: ${tcp.join(',')}`);
    }
    const outside = await net.requests(net.client, 'tcp', `${net.outside}.1`, 8080, 3);
    assert.deepEqual(tally(outside), { t1: 1, t2: 1, t3: 1 }, `from outside: ${outside.join(',')}`);
    const udp = await net.requests(net.host, 'udp', '127.0.0.1', 5300, 3);
    assert.deepEqual(tally(udp), { t1: 1, t2: 1, t3: 1 }, `udp: ${udp.join(',')}`);

    const [none] = await net.requests(net.host, 'tcp', '127.0.0.1', 8081, 1);
    assert.match(none ?? '', /^ERR ECONNREFUSED \d+$/, 'a port with no task is refused');
    assert.ok(Number(none?.split(' ')[2]) < 1000, none);

    await m.apply([{ protocol: 'tcp', publishedPort: 8080, targetPort: 80, backends: [net.taskIp(2)] }]);
    assert.deepEqual(tally(await net.requests(net.host, 'tcp', '127.0.0.1', 8080, 3)), { t2: 3 });
    const [gone] = await net.requests(net.host, 'udp', '127.0.0.1', 5300, 1);
    assert.match(gone ?? '', /^ERR /, 'an unpublished port leads nowhere');

    await m.remove();
    await assertGone('ingA');
    await m.remove(); // again: nothing there, no error
  });

  it('holds its ports in its own namespace, and is adopted and removed by the next engine after a kill -9', async () => {
    const sandboxPath = join(dir, 'netns', 'ingB');
    // an engine in the node's namespace (no hostNetns: nft, ip and the port sockets are its own)
    const script = `
      import { NftIngressMesh } from ${JSON.stringify(join(repoRoot, 'src/engine/network/lb/ingress-mesh.ts'))};
      const [opts, ports] = process.argv.slice(1).map((a) => JSON.parse(a));
      const m = new NftIngressMesh(opts);
      await m.ensureSandbox();
      await m.apply(ports);
      console.log('ready');
      setInterval(() => {}, 1000);
    `;
    const opts = { sandboxPath, hostLink: 'ingB0' };
    const child = spawn(
      'nsenter',
      [
        `--net=${net.path(net.host)}`,
        ...nodeScript(script, JSON.stringify(opts), JSON.stringify(ports.slice(0, 1))),
      ],
      { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    engine = child;
    let out = '';
    let err = '';
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.stderr?.on('data', (d: Buffer) => {
      err += d.toString();
    });
    for (let i = 0; i < 400 && !out.includes('ready'); i++) {
      if (child.exitCode !== null) break;
      await sleep(50);
    }
    assert.ok(out.includes('ready'), `the first engine made its sandbox and rules: ${out}${err}`);
    await net.attach(sandboxPath, `${net.overlay}.3`, 'eth1');
    assert.deepEqual(tally(await net.requests(net.host, 'tcp', '127.0.0.1', 8080, 3)), {
      t1: 1,
      t2: 1,
      t3: 1,
    });
    assert.equal(await bindProbe(8080), 'EADDRINUSE', 'the published port is held by the engine');
    const exited = new Promise((r) => child.once('exit', r));
    if (child.pid) process.kill(child.pid, 'SIGKILL');
    await exited;

    assert.equal(await bindProbe(8080), 'free', 'the port went with the engine');
    // a new engine: nothing in memory; the sandbox is whole, kept, and still answering
    const next = mesh('ingB');
    assert.deepEqual(await next.ensureSandbox(), { sandboxKey: sandboxPath });
    assert.deepEqual(tally(await net.requests(net.host, 'tcp', '127.0.0.1', 8080, 3)), {
      t1: 1,
      t2: 1,
      t3: 1,
    });
    await next.apply(ports.slice(0, 1));

    const cleaner = mesh('ingB');
    await cleaner.remove();
    await assertGone('ingB');
  });
});
