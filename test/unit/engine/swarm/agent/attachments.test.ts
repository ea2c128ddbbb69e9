import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BerthError, isKind } from '../../../../../src/common/errors.js';
import { Logger } from '../../../../../src/common/log.js';
import type { VipBackendSet } from '../../../../../src/engine/network/lb/lb.types.js';
import type {
  NodeOverlayState,
  OverlayTask,
  OverlayVip,
  TaskAttachment,
} from '../../../../../src/engine/network/overlay/overlay.types.js';
import { type ManagerLink, NetworkAttachments } from '../../../../../src/engine/swarm/agent/attachments.js';
import type { OverlayPort } from '../../../../../src/engine/swarm/agent/overlay-port.js';

class FakeOverlay implements OverlayPort {
  readonly log: string[] = [];
  readonly known = new Set<string>();
  readonly plugged = new Set<string>();
  vips: OverlayVip[] = [];
  async sync(_s: NodeOverlayState) {}
  async gatewayAddress() {
    return '172.18.0.1';
  }
  async attach(t: OverlayTask) {
    this.log.push(
      `attach ${t.taskId} ${t.netns} ${t.attachments.map((a) => a.address).join(',')} first=${t.firstIndex} keeps=${t.keepsDefaultNetwork}`,
    );
    this.plugged.add(t.taskId);
  }
  async plugOne(id: string, a: TaskAttachment, ifname: string) {
    this.log.push(`plug ${id} ${a.networkId} ${a.address} ${ifname}`);
  }
  async unplugOne(id: string, networkId: string) {
    this.log.push(`unplug ${id} ${networkId}`);
  }
  async detach(id: string, opts?: { unplug?: boolean }) {
    if (this.plugged.delete(id)) this.log.push(`detach ${id}${opts?.unplug ? ' unplug' : ''}`);
  }
  attached(id: string) {
    return this.plugged.has(id);
  }
  knows(id: string) {
    return this.known.has(id);
  }
  vipsFor() {
    return this.vips;
  }
  async sweep() {}
}

/** A manager that hands out addresses of `ov` (net1) and `ov2` (net2), attachable, and refuses `plain`. */
class FakeManager implements ManagerLink {
  readonly calls: string[] = [];
  /** `<container>/<network ID>` → address. */
  held = new Map<string, string>();
  /** Holds the answer to a release until it resolves (a slow manager). */
  releaseGate?: Promise<void>;
  private next = 2;
  async call<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
    const b = (body ?? {}) as {
      ContainerID?: string;
      Network?: string;
      NetworkID?: string;
      Address?: string;
    };
    this.calls.push(
      `${method} ${path} ${b.ContainerID ?? ''}${b.Network ? ` ${b.Network}` : ''}${b.NetworkID ? ` ${b.NetworkID}` : ''}`,
    );
    if (method === 'GET')
      return [...this.held.keys()].map((k) => {
        const [c = '', n = ''] = k.split('/');
        return { TaskID: `t-${c}-${n}`, ContainerID: c, NetworkID: n };
      }) as T;
    if (path === '/v1/attachments/release') {
      await this.releaseGate;
      for (const k of [...this.held.keys()])
        if (k.startsWith(`${b.ContainerID}/`) && (!b.NetworkID || k.endsWith(`/${b.NetworkID}`)))
          this.held.delete(k);
      return { Released: [] } as T;
    }
    if (b.Network === 'plain') throw new BerthError('Forbidden', 'network plain not manually attachable');
    const id = b.Network === 'ov2' ? 'net2' : 'net1';
    if (b.Address === '10.0.1.200') throw new BerthError('Conflict', 'Address already in use');
    const key = `${b.ContainerID}/${id}`;
    const address = this.held.get(key) ?? `${b.Address ?? `10.0.1.${this.next++}`}/24`;
    this.held.set(key, address);
    return {
      TaskID: `t-${b.ContainerID}-${id}`,
      NetworkID: id,
      NetworkName: b.Network,
      Address: address,
    } as T;
  }
}

function setUp() {
  const overlay = new FakeOverlay();
  const applied: Array<{ key: string; vips: VipBackendSet[] }> = [];
  const lb = {
    apply: async (key: string, vips: VipBackendSet[]) => {
      applied.push({ key, vips });
    },
    clear: async () => {},
  };
  const port = new NetworkAttachments({ overlay, lb, log: new Logger('error'), pictureWaitMs: 2000 });
  const manager = new FakeManager();
  return { overlay, applied, port, manager };
}

const req = (id: string, network = 'ov', more: Array<{ network: string; ipv4Address?: string }> = []) => ({
  containerId: id,
  sandboxId: `sb-${id}`,
  sandboxKey: `/run/netns/sb-${id}`,
  networks: [{ network, names: [id] }, ...more.map((m) => ({ ...m, names: [id] }))],
  firstIndex: 0,
  usedIfnames: [],
  defaultRoute: true,
});

describe("a node's plain containers on swarm networks", () => {
  it('is inactive outside a swarm', async () => {
    const { port } = setUp();
    assert.equal(port.active(), false);
    await assert.rejects(port.attach(req('c1')), (err: Error) => isKind(err, 'Unavailable'));
  });

  it("waits for the node's picture, plugs the sandbox, sets its VIP table, and releases", async () => {
    const { overlay, applied, port, manager } = setUp();
    port.useLink(manager);
    overlay.vips = [{ service: 's', vip: '10.0.1.9', backends: ['10.0.1.10'] }];
    const pending = port.attach(req('c1'));
    await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(overlay.log, [], 'not before the picture carries the network');
    overlay.known.add('net1');
    await port.overlayChanged();
    const [ep] = await pending;
    assert.equal(ep?.network, 'ov');
    assert.equal(ep?.networkId, 'net1');
    assert.equal(ep?.ipAddress, '10.0.1.2');
    assert.equal(ep?.prefixLen, 24);
    assert.equal(ep?.macAddress, '02:42:0a:00:01:02');
    assert.equal(ep?.ifname, 'eth0');
    assert.deepEqual(ep?.swarm, { taskId: 't-c1-net1' });
    assert.deepEqual(overlay.log, [
      'attach c1 /run/netns/sb-c1  first=1 keeps=false',
      'plug c1 net1 10.0.1.2/24 eth0',
    ]);
    assert.deepEqual(applied.at(-1), {
      key: '/run/netns/sb-c1',
      vips: [{ vip: '10.0.1.9', backends: ['10.0.1.10'] }],
    });

    await port.detach('c1');
    assert.deepEqual(overlay.log.at(-1), 'detach c1 unplug');
    assert.equal(manager.held.size, 0);
  });

  it("takes a restart's attach after its stop's release", async () => {
    const { overlay, port, manager } = setUp();
    port.useLink(manager);
    overlay.known.add('net1');
    await port.attach(req('c1'));
    manager.calls.length = 0;
    const released = port.detach('c1');
    const again = port.attach(req('c1'));
    await Promise.all([released, again]);
    assert.deepEqual(manager.calls, ['POST /v1/attachments/release c1', 'POST /v1/attachments c1 ov']);
    assert.ok(manager.held.has('c1/net1'));
  });

  it("answers a network that is not attachable in dockerd's words, holding nothing", async () => {
    const { port, manager } = setUp();
    port.useLink(manager);
    await assert.rejects(
      port.attach(req('c1', 'plain')),
      (err: Error) =>
        isKind(err, 'System') &&
        err.message ===
          'Could not attach to network plain: rpc error: code = PermissionDenied desc = network plain not manually attachable',
    );
    assert.ok(manager.calls.includes('POST /v1/attachments/release c1'));
  });

  it('plugs restored containers again and releases the attachments of containers that left', async () => {
    const { overlay, port, manager } = setUp();
    manager.held.set('gone/net1', '10.0.1.8/24');
    manager.held.set('kept/net1', '10.0.1.7/24');
    port.restore('kept', { sandboxId: 'sb', sandboxKey: '/run/netns/sb' }, [
      {
        network: 'ov',
        networkId: 'net1',
        endpointId: 'e',
        sandboxId: 'sb',
        sandboxKey: '/run/netns/sb',
        ipAddress: '10.0.1.7',
        prefixLen: 24,
        gateway: '',
        macAddress: '02:42:0a:00:01:07',
        ifname: 'eth1',
        swarm: { taskId: 't-kept' },
      },
    ]);
    port.useLink(manager);
    overlay.known.add('net1');
    await port.overlayChanged();
    assert.deepEqual(overlay.log, [
      'attach kept /run/netns/sb  first=0 keeps=true',
      'plug kept net1 10.0.1.7/24 eth1',
    ]);
    await port.reconcile();
    assert.deepEqual([...manager.held.keys()], ['kept/net1']);
  });

  it("keeps the attachment of a container that joins while an engine start's releases go on", async () => {
    // an engine start: the node's first full picture releases the attachments of containers that
    // left while a restart-policy container comes back on its overlay with the address it had
    const { overlay, port, manager } = setUp();
    manager.held.set('gone/net1', '10.0.1.8/24');
    manager.held.set('k/net1', '10.0.1.77/24');
    port.useLink(manager);
    overlay.known.add('net1');
    let answer: () => void = () => undefined;
    manager.releaseGate = new Promise((resolve) => {
      answer = resolve;
    });
    const reconciled = port.reconcile();
    await new Promise((r) => setTimeout(r, 10));
    const [e] = await port.attach({
      ...req('k'),
      networks: [{ network: 'ov', names: [], ipv4Address: '10.0.1.77' }],
    });
    answer();
    await reconciled;
    assert.equal(e?.ipAddress, '10.0.1.77');
    assert.deepEqual([...manager.held.keys()], ['k/net1'], 'the task it holds stays; the other goes');
  });

  it('releases a network a container left while no manager answered, and keeps the one it holds', async () => {
    const { overlay, port, manager } = setUp();
    port.useLink(manager);
    overlay.known.add('net1');
    overlay.known.add('net2');
    await port.attach(req('c1', 'ov', [{ network: 'ov2' }]));
    // disconnect from ov2 while the manager takes no release: its task stays there
    const real = manager.call.bind(manager);
    manager.call = async <T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> => {
      if (path === '/v1/attachments/release') throw new BerthError('Unavailable', 'no manager');
      return real<T>(method, path, body);
    };
    await port.attach(req('c1', 'ov'));
    manager.call = real;
    assert.deepEqual([...manager.held.keys()], ['c1/net1', 'c1/net2']);
    await port.reconcile();
    assert.deepEqual([...manager.held.keys()], ['c1/net1'], 'only the task of the network it left goes');
    assert.ok(manager.calls.includes('POST /v1/attachments/release c1 net2'));
    assert.ok(!manager.calls.includes('POST /v1/attachments/release c1'), 'never all of them');
  });

  it('connects and disconnects one network at a time, the others untouched', async () => {
    const { overlay, port, manager } = setUp();
    port.useLink(manager);
    overlay.known.add('net1');
    overlay.known.add('net2');
    const [a] = await port.attach(req('c1'));
    assert.deepEqual(port.interfaces('c1'), ['eth0', 'eth1']);
    overlay.log.length = 0;
    // connect: ov2 on the lowest free interface (eth0 is ov, eth1 the gateway bridge's)
    const both = await port.attach(req('c1', 'ov', [{ network: 'ov2' }]));
    assert.equal(both[0], a, 'the endpoint on ov is the same');
    assert.equal(both[1]?.ifname, 'eth2');
    assert.deepEqual(overlay.log, [`plug c1 net2 ${both[1]?.ipAddress}/24 eth2`]);
    // disconnect ov: only its interface and its task go
    overlay.log.length = 0;
    const left = await port.attach(req('c1', 'ov2'));
    assert.equal(left[0], both[1]);
    assert.deepEqual(overlay.log, ['unplug c1 net1']);
    assert.deepEqual([...manager.held.keys()], ['c1/net2']);
    // a connect the manager refuses leaves the rest as it was
    overlay.log.length = 0;
    await assert.rejects(port.attach(req('c1', 'ov2', [{ network: 'plain' }])), (err: Error) =>
      isKind(err, 'System'),
    );
    assert.deepEqual(overlay.log, []);
    assert.deepEqual([...manager.held.keys()], ['c1/net2']);
  });

  it('asks for the address given, and answers a refused one in dockerd words (500)', async () => {
    const { overlay, port, manager } = setUp();
    port.useLink(manager);
    overlay.known.add('net1');
    const [e] = await port.attach({
      ...req('c1'),
      networks: [{ network: 'ov', names: [], ipv4Address: '10.0.1.77' }],
    });
    assert.equal(e?.ipAddress, '10.0.1.77');
    await assert.rejects(
      port.attach({ ...req('c2'), networks: [{ network: 'ov', names: [], ipv4Address: '10.0.1.200' }] }),
      (err: Error) =>
        isKind(err, 'System') &&
        err.message ===
          'attaching to network failed, make sure your network options are correct and check manager logs: Address already in use',
    );
  });

  it('holds a start for the agent of a member node, bounded; none outside a swarm', async () => {
    const member = new NetworkAttachments({
      overlay: new FakeOverlay(),
      log: new Logger('error'),
      member: () => true,
      agentWaitMs: 5000,
    });
    const waiting = member.whenActive();
    member.useLink(new FakeManager());
    assert.equal(await waiting, true);
    const outside = new NetworkAttachments({ overlay: new FakeOverlay(), log: new Logger('error') });
    assert.equal(await outside.whenActive(), false);
    const slow = new NetworkAttachments({
      overlay: new FakeOverlay(),
      log: new Logger('error'),
      member: () => true,
      agentWaitMs: 50,
    });
    // (the wait's own timer does not hold the process: the engine's servers do)
    const hold = setTimeout(() => undefined, 2000);
    assert.equal(await slow.whenActive(), false);
    clearTimeout(hold);
  });
});
