import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BerthError, isKind } from '../../../../../src/common/errors.js';
import { Logger } from '../../../../../src/common/log.js';
import type { VipBackendSet } from '../../../../../src/engine/network/lb/lb.types.js';
import type {
  NodeOverlayState,
  OverlayTask,
  OverlayVip,
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

/** A manager that hands out addresses of `net1` (attachable) and refuses `plain`. */
class FakeManager implements ManagerLink {
  readonly calls: string[] = [];
  held = new Map<string, string>();
  private next = 2;
  async call<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
    const b = (body ?? {}) as { ContainerID?: string; Network?: string; NetworkID?: string };
    this.calls.push(`${method} ${path} ${b.ContainerID ?? ''}${b.Network ? ` ${b.Network}` : ''}`);
    if (method === 'GET')
      return [...this.held].map(([c, n]) => ({ TaskID: `t-${c}`, ContainerID: c, NetworkID: n })) as T;
    if (path === '/v1/attachments/release') {
      this.held.delete(b.ContainerID ?? '');
      return { Released: [] } as T;
    }
    if (b.Network === 'plain') throw new BerthError('Forbidden', 'network plain not manually attachable');
    this.held.set(b.ContainerID ?? '', 'net1');
    return {
      TaskID: `t-${b.ContainerID}`,
      NetworkID: 'net1',
      NetworkName: 'ov',
      Address: `10.0.1.${this.next++}/24`,
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

const req = (id: string, network = 'ov') => ({
  containerId: id,
  sandboxId: `sb-${id}`,
  sandboxKey: `/run/netns/sb-${id}`,
  networks: [{ network, names: [id] }],
  firstIndex: 0,
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
    assert.deepEqual(ep?.swarm, { taskId: 't-c1' });
    assert.deepEqual(overlay.log, ['attach c1 /run/netns/sb-c1 10.0.1.2/24 first=0 keeps=false']);
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
    assert.equal(manager.held.get('c1'), 'net1');
  });

  it("answers a network that is not attachable in dockerd's words, holding nothing", async () => {
    const { port, manager } = setUp();
    port.useLink(manager);
    await assert.rejects(
      port.attach(req('c1', 'plain')),
      (err: Error) =>
        isKind(err, 'Forbidden') &&
        err.message ===
          'Could not attach to network plain: rpc error: code = PermissionDenied desc = network plain not manually attachable',
    );
    assert.ok(manager.calls.includes('POST /v1/attachments/release c1'));
  });

  it('plugs restored containers again and releases the attachments of containers that left', async () => {
    const { overlay, port, manager } = setUp();
    manager.held.set('gone', 'net1');
    manager.held.set('kept', 'net1');
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
    assert.deepEqual(overlay.log, ['attach kept /run/netns/sb 10.0.1.7/24 first=1 keeps=true']);
    await port.reconcile();
    assert.deepEqual([...manager.held.keys()], ['kept']);
  });
});
