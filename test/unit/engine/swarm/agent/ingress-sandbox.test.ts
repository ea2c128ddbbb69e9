import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Logger } from '../../../../../src/common/log.js';
import type { IngressMesh, IngressPort } from '../../../../../src/engine/network/lb/lb.types.js';
import type {
  NodeOverlayState,
  OverlayTask,
} from '../../../../../src/engine/network/overlay/overlay.types.js';
import { INGRESS_SANDBOX, IngressSandbox } from '../../../../../src/engine/swarm/agent/ingress-sandbox.js';
import type { OverlayPort } from '../../../../../src/engine/swarm/agent/overlay-port.js';

/** The node's end of the routing mesh against a fake overlay and a fake mesh. */

class FakeOverlay implements OverlayPort {
  readonly log: string[] = [];
  private readonly plugged = new Set<string>();
  async sync(_s: NodeOverlayState) {}
  async gatewayAddress() {
    return '172.18.0.1';
  }
  async attach(t: OverlayTask) {
    this.log.push(
      `attach ${t.taskId} ${t.netns} ${t.attachments.map((a) => a.address).join(',')} gw=${t.gateway}`,
    );
    this.plugged.add(t.taskId);
  }
  async plugOne() {}
  async unplugOne() {}
  async detach(id: string) {
    if (this.plugged.delete(id)) this.log.push(`detach ${id}`);
  }
  attached(id: string) {
    return this.plugged.has(id);
  }
  knows() {
    return true;
  }
  vipsFor() {
    return [];
  }
  async sweep() {}
}

class FakeMesh implements IngressMesh {
  readonly log: string[] = [];
  ports: IngressPort[] = [];
  async ensureSandbox() {
    return { sandboxKey: '/run/berth/ingress_sbox' };
  }
  async apply(ports: IngressPort[]) {
    this.ports = ports;
    this.log.push(`apply ${ports.map((p) => `${p.publishedPort}->${p.backends.join('+')}`).join(' ')}`);
  }
  async remove() {
    this.log.push('remove');
  }
}

const port = (backends: string[]) => ({
  protocol: 'tcp' as const,
  publishedPort: 8080,
  targetPort: 80,
  backends,
});

describe('the ingress sandbox of a node', () => {
  it('attaches the sandbox to ingress without a gateway, follows the ports, and goes with the last port', async () => {
    const overlay = new FakeOverlay();
    const mesh = new FakeMesh();
    const sbox = new IngressSandbox(overlay, mesh, new Logger('error'));
    await sbox.sync(undefined);
    assert.deepEqual(mesh.log, ['remove'], 'the first picture removes a sandbox the last engine left');
    mesh.log.length = 0;
    await sbox.sync(undefined);
    await sbox.sync({ networkId: 'ing', address: '10.0.0.7/24', ports: [] });
    assert.deepEqual([...overlay.log, ...mesh.log], [], 'nothing while no port is published');
    await sbox.sync({ networkId: 'ing', address: '10.0.0.7/24', ports: [port(['10.0.0.3'])] });
    await sbox.sync({ networkId: 'ing', address: '10.0.0.7/24', ports: [port(['10.0.0.3', '10.0.0.4'])] });
    assert.deepEqual(overlay.log, [`attach ${INGRESS_SANDBOX} /run/berth/ingress_sbox 10.0.0.7/24 gw=false`]);
    assert.deepEqual(mesh.log, ['apply 8080->10.0.0.3', 'apply 8080->10.0.0.3+10.0.0.4']);
    await sbox.sync({ networkId: 'ing', address: '10.0.0.7/24', ports: [] });
    assert.deepEqual(overlay.log.at(-1), `detach ${INGRESS_SANDBOX}`);
    assert.deepEqual(mesh.log.at(-1), 'remove');
    await sbox.sync({ networkId: 'ing', address: '10.0.0.9/24', ports: [port([])] });
    assert.equal(
      overlay.log.at(-1),
      `attach ${INGRESS_SANDBOX} /run/berth/ingress_sbox 10.0.0.9/24 gw=false`,
    );
    await sbox.leave();
    assert.deepEqual(overlay.log.at(-1), `detach ${INGRESS_SANDBOX}`);
    assert.deepEqual(mesh.log.at(-1), 'remove');
  });
});
