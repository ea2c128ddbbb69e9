import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { TestEngine } from '../../helpers/engine.js';
import { freePort, initLoopbackSwarm } from '../../helpers/swarm-etcd.js';

/**
 * Swarm-scope overlay networks (issue 14 §9 step 2) on a one-manager swarm: create, list, inspect
 * and remove by the docker CLI and raw HTTP, with dockerd 20.10's shapes and words (compared
 * against the reference dockerd in swarm mode: test/helpers/reference-dockerd.ts), the ingress
 * network made by init, the encrypted refusal, the in-use refusal and the swarm-scope events.
 */

const NOT_MANAGER =
  'This node is not a swarm manager. Use "docker swarm init" or "docker swarm join" to connect this node to swarm and try again.';

interface NetView {
  Name: string;
  Id: string;
  Scope: string;
  Driver: string;
  IPAM: { Config: Array<{ Subnet: string; Gateway: string; IPRange?: string }> };
  Options: Record<string, string>;
  Labels: Record<string, string> | null;
  Attachable: boolean;
  Ingress: boolean;
  Containers: unknown;
}

describe('swarm overlay networks (one manager)', () => {
  let engine: TestEngine;
  const since = Math.floor(Date.now() / 1000);

  before(async () => {
    engine = await TestEngine.start({
      bridge: 'none',
      args: ['--swarm-etcd-peer-port', String(await freePort())],
    });
    const out = await engine.docker(['network', 'create', '-d', 'overlay', 'early']);
    assert.equal(out.code, 1);
    assert.equal(out.stderr.trim(), `Error response from daemon: ${NOT_MANAGER}`);
    await initLoopbackSwarm(engine);
  });
  after(async () => {
    await engine?.request('POST', '/swarm/leave?force=1').catch(() => undefined);
    await engine?.destroy();
  });

  it('has the ingress network after init (Ingress, 10.0.0.0/24, VNI 4096)', async () => {
    const [ing] = JSON.parse(await engine.dockerOk(['network', 'inspect', 'ingress'])) as NetView[];
    assert.ok(ing);
    assert.match(ing.Id, /^[0-9a-z]{25}$/);
    assert.equal(ing.Scope, 'swarm');
    assert.equal(ing.Driver, 'overlay');
    assert.equal(ing.Ingress, true);
    assert.deepEqual(ing.IPAM.Config, [{ Subnet: '10.0.0.0/24', Gateway: '10.0.0.1' }]);
    assert.deepEqual(ing.Options, { 'com.docker.network.driver.overlay.vxlanid_list': '4096' });
  });

  it('creates overlay networks with dockerd’s shapes: next block of the pool, VNIs from 4097', async () => {
    const id1 = await engine.dockerOk([
      'network',
      'create',
      '-d',
      'overlay',
      '--attachable',
      '--label',
      'a=b',
      '--opt',
      'x=y',
      'ov1',
    ]);
    assert.match(id1, /^[0-9a-z]{25}$/);
    await engine.dockerOk([
      'network',
      'create',
      '-d',
      'overlay',
      '--subnet',
      '10.9.0.0/24',
      '--gateway',
      '10.9.0.254',
      '--ip-range',
      '10.9.0.128/25',
      'ov2',
    ]);
    await engine.dockerOk(['network', 'create', '-d', 'overlay', 'ov3']);
    const res = await engine.request('GET', '/v1.41/networks/ov1');
    assert.equal(res.status, 200);
    const ov1 = res.json<Record<string, unknown>>();
    assert.deepEqual(Object.keys(ov1), [
      'Name',
      'Id',
      'Created',
      'Scope',
      'Driver',
      'EnableIPv6',
      'IPAM',
      'Internal',
      'Attachable',
      'Ingress',
      'ConfigFrom',
      'ConfigOnly',
      'Containers',
      'Options',
      'Labels',
    ]);
    assert.deepEqual(
      { ...ov1, Created: undefined },
      {
        Name: 'ov1',
        Id: id1,
        Created: undefined,
        Scope: 'swarm',
        Driver: 'overlay',
        EnableIPv6: false,
        IPAM: { Driver: 'default', Options: null, Config: [{ Subnet: '10.0.1.0/24', Gateway: '10.0.1.1' }] },
        Internal: false,
        Attachable: true,
        Ingress: false,
        ConfigFrom: { Network: '' },
        ConfigOnly: false,
        Containers: null,
        Options: { 'com.docker.network.driver.overlay.vxlanid_list': '4097', x: 'y' },
        Labels: { a: 'b' },
      },
    );
    const [ov2] = JSON.parse(await engine.dockerOk(['network', 'inspect', 'ov2'])) as NetView[];
    assert.deepEqual(ov2?.IPAM.Config, [
      { Subnet: '10.9.0.0/24', IPRange: '10.9.0.128/25', Gateway: '10.9.0.254' },
    ]);
    assert.equal(ov2?.Options['com.docker.network.driver.overlay.vxlanid_list'], '4098');
    assert.equal(ov2?.Labels, null);
    const [ov3] = JSON.parse(await engine.dockerOk(['network', 'inspect', 'ov3'])) as NetView[];
    assert.deepEqual(ov3?.IPAM.Config, [{ Subnet: '10.0.2.0/24', Gateway: '10.0.2.1' }]);
    assert.equal(ov3?.Options['com.docker.network.driver.overlay.vxlanid_list'], '4099');

    const ls = await engine.dockerOk([
      'network',
      'ls',
      '--filter',
      'scope=swarm',
      '--format',
      '{{.Name}} {{.Driver}} {{.Scope}}',
    ]);
    assert.deepEqual(ls.split('\n').sort(), [
      'ingress overlay swarm',
      'ov1 overlay swarm',
      'ov2 overlay swarm',
      'ov3 overlay swarm',
    ]);
    const local = await engine.dockerOk([
      'network',
      'ls',
      '--filter',
      'scope=local',
      '--format',
      '{{.Name}}',
    ]);
    assert.ok(!local.split('\n').includes('ov1'));
    const byLabel = await engine.dockerOk([
      'network',
      'ls',
      '--filter',
      'label=a=b',
      '--format',
      '{{.Name}}',
    ]);
    assert.equal(byLabel, 'ov1');
    // by ID prefix, and scope=swarm
    const prefixed = await engine.request('GET', `/networks/${id1.slice(0, 6)}?scope=swarm`);
    assert.equal(prefixed.json<NetView>().Name, 'ov1');
    assert.equal((await engine.request('GET', '/networks/ov1?scope=local')).status, 404);
  });

  it('refuses what dockerd refuses: a duplicate name, bad blocks, encryption without ESP', async () => {
    const dup = await engine.docker(['network', 'create', '-d', 'overlay', 'ov1']);
    assert.equal(dup.code, 1);
    assert.equal(dup.stderr.trim(), 'Error response from daemon: network with name ov1 already exists');
    const enc = await engine.request('POST', '/networks/create', {
      body: { Name: 'ov4', Driver: 'overlay', Options: { encrypted: '' } },
    });
    assert.equal(enc.status, 400);
    assert.equal(
      enc.json<{ message: string }>().message,
      'encrypted overlay networks are not supported on this kernel (no ESP)',
    );
    assert.equal((await engine.request('GET', '/networks/ov4')).status, 404, 'nothing half-created');
    const overlap = await engine.request('POST', '/networks/create', {
      body: { Name: 'ov5', Driver: 'overlay', IPAM: { Config: [{ Subnet: '10.0.1.0/25' }] } },
    });
    assert.equal(overlap.status, 400);
    const outside = await engine.request('POST', '/networks/create', {
      body: {
        Name: 'ov5',
        Driver: 'overlay',
        IPAM: { Config: [{ Subnet: '10.8.0.0/24', Gateway: '10.7.0.1' }] },
      },
    });
    assert.equal(outside.status, 400);
    const badType = await engine.request('POST', '/networks/create', {
      body: { Name: 'ov5', Driver: 'overlay', Attachable: 'yes' },
    });
    assert.equal(badType.status, 400);
    assert.equal((await engine.request('GET', '/networks/ov5')).status, 404);
  });

  it('refuses removal while a service uses the network, removes it after; events scope=swarm', async () => {
    const [ov1] = JSON.parse(await engine.dockerOk(['network', 'inspect', 'ov1'])) as NetView[];
    const svc = await engine.request('POST', '/services/create', {
      body: {
        Name: 'web',
        TaskTemplate: {
          ContainerSpec: { Image: 'busybox:latest', Args: ['sleep', '1000'] },
          Networks: [{ Target: 'ov1' }],
        },
        Mode: { Replicated: { Replicas: 0 } },
      },
    });
    assert.equal(svc.status, 201, svc.text());
    const svcId = svc.json<{ ID: string }>().ID;
    const inUse = await engine.docker(['network', 'rm', 'ov1']);
    assert.equal(inUse.code, 1);
    assert.equal(
      inUse.stderr.split('\n')[0],
      `Error response from daemon: rpc error: code = FailedPrecondition desc = network ${ov1?.Id} is in use by service ${svcId}`,
    );
    await engine.dockerOk(['service', 'rm', 'web']);
    await engine.dockerOk(['network', 'rm', 'ov1', 'ov2']);
    const gone = await engine.request('DELETE', '/networks/nope');
    assert.equal(gone.status, 404);
    assert.equal(gone.json<{ message: string }>().message, 'network nope not found');
    const ls = await engine.dockerOk(['network', 'ls', '--filter', 'scope=swarm', '--format', '{{.Name}}']);
    assert.deepEqual(ls.split('\n').sort(), ['ingress', 'ov3']);

    const until = Math.floor(Date.now() / 1000) + 1;
    const ev = await engine.dockerOk([
      'events',
      '--since',
      String(since),
      '--until',
      String(until),
      '--filter',
      'type=network',
      '--filter',
      'scope=swarm',
      '--format',
      '{{.Action}} {{.Actor.Attributes.name}} {{.Scope}}',
    ]);
    const lines = ev.split('\n');
    for (const want of [
      'create ingress swarm',
      'create ov1 swarm',
      'create ov2 swarm',
      'create ov3 swarm',
      'remove ov1 swarm',
      'remove ov2 swarm',
    ]) {
      assert.ok(lines.includes(want), `${want} in ${ev}`);
    }
    assert.ok(!lines.some((l) => l.includes('ov4') || l.includes('ov5')));
  });

  it('lets ingress be removed and made again with --ingress while no service uses it', async () => {
    // the CLI asks before removing the routing-mesh network
    await engine.dockerOk(['network', 'rm', 'ingress'], { input: 'y\n' });
    assert.equal((await engine.request('GET', '/networks/ingress')).status, 404);
    const id = await engine.dockerOk(['network', 'create', '-d', 'overlay', '--ingress', 'ingress2']);
    const [ing] = JSON.parse(await engine.dockerOk(['network', 'inspect', id])) as NetView[];
    assert.equal(ing?.Ingress, true);
    assert.deepEqual(ing?.IPAM.Config, [{ Subnet: '10.0.0.0/24', Gateway: '10.0.0.1' }]);
    assert.equal(ing?.Options['com.docker.network.driver.overlay.vxlanid_list'], '4096');
    const second = await engine.request('POST', '/networks/create', {
      body: { Name: 'ingress3', Driver: 'overlay', Ingress: true },
    });
    assert.equal(second.status, 409);
  });

  it('leaves no swarm network after leave --force', async () => {
    await engine.dockerOk(['swarm', 'leave', '--force']);
    const ls = await engine.dockerOk(['network', 'ls', '--format', '{{.Name}}']);
    assert.deepEqual(ls.split('\n').sort(), ['host', 'none']);
    await initLoopbackSwarm(engine);
    const again = await engine.dockerOk([
      'network',
      'ls',
      '--filter',
      'scope=swarm',
      '--format',
      '{{.Name}}',
    ]);
    assert.equal(again, 'ingress');
  });
});
