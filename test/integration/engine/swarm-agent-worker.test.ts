import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { keys } from '../../../src/engine/swarm/keys.js';
import type { StoredService } from '../../../src/engine/swarm/services/service.types.js';
import type { EtcdStore } from '../../../src/engine/swarm/store/etcd-store.js';
import type { StoredTask } from '../../../src/engine/swarm/tasks/task.types.js';
import { eventually } from '../../helpers/eventually.js';
import { runCommand } from '../../helpers/process.js';
import { SwarmHosts } from '../../helpers/swarm-hosts.js';
import { engineLogsOnFailure, type NsEngine, type TestNetwork } from '../../helpers/swarm-netns.js';

/**
 * The agent of a worker on another "host" (network namespace): the orchestrator places a service's
 * task on it (`node.role==worker`), its assignments come from the manager's cluster API over mutual
 * TLS, with the secret its task uses; cut off, it keeps its task running while the manager, seeing
 * the node down, scales the service to 0 (the task reaped) and up again; back, it removes the
 * container of the task it no longer has before it runs the new one.
 */

const newId = () =>
  BigInt(`0x${randomBytes(16).toString('hex')}`)
    .toString(36)
    .padStart(25, '0')
    .slice(0, 25);

describe('swarm agent on a worker in another network namespace', () => {
  let hosts: SwarmHosts;
  let net: TestNetwork;
  let m: NsEngine;
  let w: NsEngine;
  let store: EtcdStore;
  let workerId: string;
  let service: StoredService;
  let secretId: string;

  engineLogsOnFailure(() => hosts?.engines);
  before(async () => {
    hosts = await SwarmHosts.start(['manager', 'worker'], { busybox: 'joiners', store: true });
    [m, w] = hosts.engines as [NsEngine, NsEngine];
    net = hosts.net;
    store = hosts.store as EtcdStore;
    workerId = hosts.nodeId(2);
    const secret = await runCommand('docker', ['-H', `unix://${m.socket}`, 'secret', 'create', 'ws', '-'], {
      input: 'from the manager',
      env: { DOCKER_HOST: '', DOCKER_CONFIG: join(m.dir, 'docker-config') },
    });
    assert.equal(secret.code, 0, secret.stderr);
    secretId = secret.stdout.trim();
  });
  after(async () => {
    await hosts?.destroy();
  });

  async function tasks(): Promise<StoredTask[]> {
    const r = await store.range(keys.tasks);
    return r.kvs.map((kv) => JSON.parse(kv.value) as StoredTask).filter((t) => t.ServiceID === service.ID);
  }

  /** The service's one task desired to run, once the orchestrator made it. */
  async function liveTask(): Promise<StoredTask> {
    let live: StoredTask[] = [];
    await eventually(
      'the service task',
      async () => {
        live = (await tasks()).filter((t) => t.DesiredState === 'running');
        return live.length === 1;
      },
      20_000,
      100,
    );
    return live[0] as StoredTask;
  }

  async function scale(replicas: number): Promise<void> {
    service.Spec.Mode = { Replicated: { Replicas: replicas } };
    await store.put(keys.service(service.ID), JSON.stringify(service));
  }

  async function state(taskId: string): Promise<string> {
    const kv = await store.get(keys.task(taskId));
    return kv ? (JSON.parse(kv.value) as StoredTask).Status.State : 'gone';
  }

  const running = async (name: string) =>
    (await w.docker(['inspect', '-f', '{{.State.Running}}', name])).stdout.trim() === 'true';

  it('runs its task with the secret the manager sends it, and nothing on the manager', async () => {
    const now = new Date().toISOString();
    service = {
      ID: newId(),
      CreatedAt: now,
      UpdatedAt: now,
      Spec: {
        Name: 'wsvc',
        Mode: { Replicated: { Replicas: 1 } },
        TaskTemplate: {
          Placement: { Constraints: ['node.role==worker'] },
          ContainerSpec: {
            Image: 'busybox:latest',
            Command: ['sleep', '300'],
            StopGracePeriod: 500_000_000,
            Secrets: [
              { SecretID: secretId, SecretName: 'ws', File: { Name: 'ws', UID: '0', GID: '0', Mode: 0o444 } },
            ],
          },
        },
      },
      Endpoint: {},
      _: { specVersion: 1 },
    };
    await store.put(keys.service(service.ID), JSON.stringify(service));
    const first = await liveTask();
    assert.equal(first.NodeID, workerId, 'placed on the worker');
    const t1 = first.ID;
    await eventually('the task runs on the worker', async () => (await state(t1)) === 'running', 20_000, 100);
    const name = `wsvc.1.${t1}`;
    assert.equal(await w.dockerOk(['exec', name, 'cat', '/run/secrets/ws']), 'from the manager');
    assert.equal(
      await w.dockerOk(['inspect', '-f', '{{index .Config.Labels "com.docker.swarm.node.id"}}', name]),
      workerId,
    );
    assert.equal(await m.dockerOk(['ps', '-aq']), '', 'the manager runs nothing of it');

    // cut off: the task keeps running; meanwhile the manager, the node down, scales the service to
    // 0 (the task, on a down node, is reaped at once) and back to 1 (a new task, waiting for a node)
    const cutAt = Date.now();
    await net.link(2, 'down');
    await scale(0);
    await eventually('the task reaped', async () => (await state(t1)) === 'gone', 20_000, 200);
    await scale(1);
    const t2 = (await liveTask()).ID;
    assert.notEqual(t2, t1);
    // longer than the stream's idle limit (3 heartbeats + 1 s): the worker gives the stream up
    await new Promise((r) => setTimeout(r, Math.max(0, cutAt + 5500 - Date.now())));
    assert.ok(await running(name), 'a task keeps running while no manager can be reached');
    await net.link(2, 'up');
    await eventually('the new task runs', async () => (await state(t2)) === 'running', 30_000, 200);
    assert.notEqual((await w.docker(['inspect', name])).code, 0, 'the dropped task’s container is gone');
    assert.match(w.log(), /lost the assignments stream/, 'the worker gave the dead stream up and came back');
    const created = await w.dockerOk(['inspect', '-f', '{{.Created}}', `wsvc.1.${t2}`]);
    assert.ok(created.length > 0);
  });

  it('removes its task containers and secret files when it leaves', async () => {
    assert.notEqual(await w.dockerOk(['ps', '-q', '--filter', 'is-task=true']), '');
    assert.equal(await w.dockerOk(['swarm', 'leave']), 'Node left the swarm.');
    assert.equal(await w.dockerOk(['ps', '-aq', '--filter', 'label=com.docker.swarm.task.id']), '');
    const mounts = await readFile('/proc/self/mountinfo', 'utf8');
    assert.ok(!mounts.includes(join(w.dir, 'exec', 'swarm', 'tasks')), 'no secrets tmpfs left');
  });
});
