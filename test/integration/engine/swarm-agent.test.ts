import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { clusterCall } from '../../../src/engine/swarm/cluster-api/client.js';
import { keys } from '../../../src/engine/swarm/keys.js';
import type {
  ServiceSpec,
  StoredService,
  TaskSpec,
} from '../../../src/engine/swarm/services/service.types.js';
import { EtcdStore } from '../../../src/engine/swarm/store/etcd-store.js';
import type { StoredTask } from '../../../src/engine/swarm/tasks/task.types.js';
import { ensureBusybox } from '../../helpers/busybox.js';
import { TestEngine } from '../../helpers/engine.js';
import { eventually } from '../../helpers/eventually.js';
import { startTestRegistry, tempDir } from '../../helpers/registry.js';
import { freePort } from '../../helpers/swarm-etcd.js';

/**
 * The swarm agent on a one-manager swarm (issue 14 §6): the test writes a service and tasks
 * assigned to the node straight into etcd (as the orchestrator will), and the node's agent, over
 * its own cluster API's assignments stream, runs them as containers with moby's names and labels,
 * the secret as a file, and reports their states forward; desired `shutdown` stops and removes.
 */

const id = () =>
  BigInt(`0x${randomBytes(16).toString('hex')}`)
    .toString(36)
    .padStart(25, '0')
    .slice(0, 25);

describe('swarm agent (one manager, tasks written into etcd)', () => {
  let engine: TestEngine;
  let store: EtcdStore;
  let nodeId: string;
  let secretId: string;
  let listenPort: number;

  before(async () => {
    const peerPort = await freePort();
    listenPort = await freePort();
    engine = await TestEngine.start({ args: ['--swarm-etcd-peer-port', String(peerPort)] });
    await ensureBusybox(engine);
    await engine.dockerOk([
      'swarm',
      'init',
      '--advertise-addr',
      '127.0.0.1',
      '--listen-addr',
      `127.0.0.1:${listenPort}`,
    ]);
    nodeId = (await engine.request('GET', '/info')).json<{ Swarm: { NodeID: string } }>().Swarm.NodeID;
    store = new EtcdStore({ socketPath: join(engine.execRoot, 'swarm', 'etcd.sock:0') });
    const created = await engine.request('POST', '/secrets/create', {
      body: { Name: 's1', Data: Buffer.from('top-secret\n').toString('base64') },
    });
    assert.equal(created.status, 201, created.text());
    secretId = created.json<{ ID: string }>().ID;
  });
  after(async () => {
    store?.close();
    await engine?.request('POST', '/swarm/leave?force=1').catch(() => undefined);
    await engine?.destroy();
  });

  async function putService(name: string, template: TaskSpec, extra: Partial<ServiceSpec> = {}) {
    const now = new Date().toISOString();
    const service: StoredService = {
      ID: id(),
      CreatedAt: now,
      UpdatedAt: now,
      Spec: {
        Name: name,
        Labels: {},
        TaskTemplate: template,
        Mode: { Replicated: { Replicas: 1 } },
        ...extra,
      },
      Endpoint: {},
      _: { specVersion: 1 },
    };
    await store.put(keys.service(service.ID), JSON.stringify(service));
    return service;
  }

  async function putTask(service: StoredService, slot: number): Promise<string> {
    const now = new Date().toISOString();
    const task: StoredTask = {
      ID: id(),
      CreatedAt: now,
      UpdatedAt: now,
      Labels: {},
      Spec: service.Spec.TaskTemplate ?? {},
      ServiceID: service.ID,
      Slot: slot,
      NodeID: nodeId,
      Status: { Timestamp: now, State: 'assigned', Message: 'scheduler assigned task to node' },
      DesiredState: 'running',
      _: { specVersion: 1, serviceName: service.Spec.Name ?? '' },
    };
    await store.put(keys.task(task.ID), JSON.stringify(task));
    return task.ID;
  }

  async function task(taskId: string): Promise<StoredTask> {
    const kv = await store.get(keys.task(taskId));
    assert.ok(kv, `task ${taskId} is in etcd`);
    return JSON.parse(kv.value) as StoredTask;
  }

  async function setDesired(taskId: string, desired: StoredTask['DesiredState']): Promise<void> {
    const t = await task(taskId);
    await store.put(keys.task(taskId), JSON.stringify({ ...t, DesiredState: desired }));
  }

  async function waitState(taskId: string, state: string, timeoutMs = 20_000): Promise<StoredTask> {
    let last: StoredTask | undefined;
    await eventually(
      `task ${taskId} ${state}`,
      async () => {
        last = await task(taskId);
        return last.Status.State === state;
      },
      timeoutMs,
      100,
    ).catch((err: Error) => {
      throw new Error(`${err.message} (last: ${JSON.stringify(last?.Status)})`);
    });
    return last as StoredTask;
  }

  async function taskMounts(): Promise<string[]> {
    const info = await readFile('/proc/self/mountinfo', 'utf8');
    const dir = join(engine.execRoot, 'swarm', 'tasks');
    return info.split('\n').filter((l) => l.split(' ')[4]?.startsWith(dir));
  }

  it('runs an assigned task as a named, labelled container with its env and secret, then shuts it down', async () => {
    const service = await putService(
      'web',
      {
        ContainerSpec: {
          Image: 'busybox:latest',
          Command: ['sh', '-c'],
          Args: ['echo started; exec sleep 300'],
          Env: ['A=1', 'WHO={{.Service.Name}}-{{.Task.Slot}}'],
          Hostname: '{{.Service.Name}}-{{.Task.Slot}}',
          Labels: { mine: 'yes' },
          StopGracePeriod: 1_000_000_000,
          Secrets: [
            { SecretID: secretId, SecretName: 's1', File: { Name: 's1', UID: '0', GID: '0', Mode: 0o400 } },
          ],
        },
      },
      { Labels: { 'com.docker.stack.namespace': 'st' } },
    );
    const taskId = await putTask(service, 1);
    const running = await waitState(taskId, 'running');
    assert.equal(running.Status.Message, 'started');
    const name = `web.1.${taskId}`;
    const [c] = JSON.parse(await engine.dockerOk(['inspect', name]));
    // as dockerd shows it: the three fields, ExitCode 0 while it runs
    assert.deepEqual(running.Status.ContainerStatus, { ContainerID: c.Id, PID: c.State.Pid, ExitCode: 0 });
    assert.equal(c.State.Running, true);
    assert.deepEqual(c.Config.Labels, {
      mine: 'yes',
      'com.docker.stack.namespace': 'st',
      'com.docker.swarm.node.id': nodeId,
      'com.docker.swarm.service.id': service.ID,
      'com.docker.swarm.service.name': 'web',
      'com.docker.swarm.task': '',
      'com.docker.swarm.task.id': taskId,
      'com.docker.swarm.task.name': name,
    });
    assert.deepEqual(c.Config.Entrypoint, ['sh', '-c']);
    assert.deepEqual(c.Config.Cmd, ['echo started; exec sleep 300']);
    assert.equal(c.Config.Hostname, 'web-1');
    assert.ok(c.Config.Env.includes('A=1') && c.Config.Env.includes('WHO=web-1'), c.Config.Env.join(' '));
    assert.equal(await engine.dockerOk(['exec', name, 'cat', '/run/secrets/s1']), 'top-secret');
    assert.equal(
      await engine.dockerOk(['exec', name, 'stat', '-c', '%a %u %g', '/run/secrets/s1']),
      '400 0 0',
    );
    assert.equal(
      await engine.dockerOk([
        'ps',
        '--filter',
        'is-task=true',
        '--filter',
        'name=web',
        '--format',
        '{{.Names}}',
      ]),
      name,
    );
    assert.equal((await taskMounts()).length, 1, 'the task has its secrets tmpfs');

    await setDesired(taskId, 'shutdown');
    const down = await waitState(taskId, 'shutdown');
    assert.equal(down.Status.Message, 'shutdown');
    assert.equal(down.Status.ContainerStatus?.ContainerID, c.Id);
    const gone = await engine.docker(['inspect', name]);
    assert.notEqual(gone.code, 0, 'the container is removed');
    assert.deepEqual(await taskMounts(), [], 'the secrets tmpfs is gone');
  });

  it('puts configs at their targets with their owner and mode', async () => {
    const created = await engine.request('POST', '/configs/create', {
      body: { Name: 'c1', Data: Buffer.from('key=välue\n').toString('base64') },
    });
    assert.equal(created.status, 201, created.text());
    const configId = created.json<{ ID: string }>().ID;
    const svc = await putService('conf', {
      ContainerSpec: {
        Image: 'busybox:latest',
        Command: ['sleep', '300'],
        StopGracePeriod: 500_000_000,
        Configs: [
          {
            ConfigID: configId,
            ConfigName: 'c1',
            File: { Name: 'c1', UID: '1000', GID: '1001', Mode: 0o440 },
          },
          {
            ConfigID: configId,
            ConfigName: 'c1',
            File: { Name: '/etc/app.conf', UID: '0', GID: '0', Mode: 0o444 },
          },
        ],
      },
    });
    const t = await putTask(svc, 1);
    await waitState(t, 'running');
    const name = `conf.1.${t}`;
    assert.equal(await engine.dockerOk(['exec', name, 'cat', '/c1']), 'key=välue');
    assert.equal(await engine.dockerOk(['exec', name, 'stat', '-c', '%a %u %g', '/c1']), '440 1000 1001');
    assert.equal(await engine.dockerOk(['exec', name, 'cat', '/etc/app.conf']), 'key=välue');
    assert.equal(await engine.dockerOk(['exec', name, 'stat', '-c', '%a', '/etc/app.conf']), '444');
    const write = await engine.docker(['exec', name, 'sh', '-c', 'echo x > /c1']);
    assert.notEqual(write.code, 0, 'a config is read-only');
    await setDesired(t, 'shutdown');
    await waitState(t, 'shutdown');
  });

  it('publishes host-mode ports as the container’s port bindings and reports them', async () => {
    const ports = [
      { Protocol: 'tcp' as const, TargetPort: 80, PublishedPort: 0, PublishMode: 'host' as const },
    ];
    const svc = await putService(
      'webport',
      {
        ContainerSpec: {
          Image: 'busybox:latest',
          Command: ['httpd', '-f', '-p', '80', '-h', '/etc'],
          Hostname: 'served',
          StopGracePeriod: 500_000_000,
        },
      },
      { EndpointSpec: { Ports: ports } },
    );
    svc.Endpoint = { Spec: { Ports: ports }, Ports: ports };
    await store.put(keys.service(svc.ID), JSON.stringify(svc));
    const t = await putTask(svc, 1);
    const running = await waitState(t, 'running');
    const published = running.Status.PortStatus?.Ports?.[0];
    assert.equal(published?.TargetPort, 80);
    assert.equal(published?.PublishMode, 'host');
    assert.ok((published?.PublishedPort ?? 0) > 0, JSON.stringify(running.Status.PortStatus));
    const bound = await engine.dockerOk(['port', `webport.1.${t}`, '80/tcp']);
    assert.match(bound, new RegExp(`:${published?.PublishedPort}$`, 'm'));
    let body = '';
    await eventually('the published port answers', async () => {
      body = await fetch(`http://127.0.0.1:${published?.PublishedPort}/hostname`)
        .then((r) => r.text())
        .catch(() => '');
      return body !== '';
    });
    assert.equal(body.trim(), 'served');
    await setDesired(t, 'shutdown');
    await waitState(t, 'shutdown');
  });

  it('reports an exit as complete or failed, a container killed behind its back as failed', async () => {
    const ok = await putService('ok', { ContainerSpec: { Image: 'busybox:latest', Command: ['true'] } });
    const bad = await putService('bad', {
      ContainerSpec: { Image: 'busybox:latest', Command: ['sh', '-c', 'exit 3'] },
    });
    const long = await putService('long', {
      ContainerSpec: { Image: 'busybox:latest', Command: ['sleep', '300'] },
    });
    const okTask = await putTask(ok, 1);
    const badTask = await putTask(bad, 2);
    const longTask = await putTask(long, 1);

    const done = await waitState(okTask, 'complete');
    assert.equal(done.Status.Message, 'finished');
    assert.equal(done.Status.ContainerStatus?.ExitCode, 0);
    const failed = await waitState(badTask, 'failed');
    // dockerd 20.10's words: the message of the running state stays, the error says why
    assert.equal(failed.Status.Err, 'task: non-zero exit (3)');
    assert.equal(failed.Status.Message, 'started');
    assert.equal(failed.Status.ContainerStatus?.ExitCode, 3);
    // the exited container stays (for its logs) until the task is shut down
    assert.equal(await engine.dockerOk(['inspect', '-f', '{{.State.ExitCode}}', `bad.2.${badTask}`]), '3');

    await waitState(longTask, 'running');
    await engine.dockerOk(['kill', `long.1.${longTask}`]);
    const killed = await waitState(longTask, 'failed');
    assert.equal(killed.Status.Err, 'task: non-zero exit (137)');

    // a late, older report never moves a task back: the manager keeps `failed`
    const certs = join(engine.dataRoot, 'swarm', 'certs');
    const [ca, cert, key] = await Promise.all(
      ['swarm-root-ca.crt', 'swarm-node.crt', 'swarm-node.key'].map((f) => readFile(join(certs, f), 'utf8')),
    );
    const late = await clusterCall<{ Applied: string[] }>(
      `127.0.0.1:${listenPort}`,
      'POST',
      '/v1/status',
      {
        Updates: [
          {
            TaskID: badTask,
            Status: { Timestamp: new Date().toISOString(), State: 'running', Message: 'started' },
          },
        ],
      },
      { ca, cert, key },
    );
    assert.deepEqual(late.Applied, []);
    assert.equal((await task(badTask)).Status.State, 'failed');
    await setDesired(badTask, 'shutdown');
    await eventually('the finished task container removed', async () => {
      return (await engine.docker(['inspect', `bad.2.${badTask}`])).code !== 0;
    });
    assert.equal((await task(badTask)).Status.State, 'failed');
    for (const t of [okTask, longTask]) await setDesired(t, 'shutdown');
  });

  it('rejects a task whose image is missing and cannot be pulled', async () => {
    const svc = await putService('noimg', { ContainerSpec: { Image: '127.0.0.1:1/nosuch:1' } });
    const t = await putTask(svc, 1);
    const rejected = await waitState(t, 'rejected', 30_000);
    assert.equal(rejected.Status.Err, 'No such image: 127.0.0.1:1/nosuch:1');
    assert.equal(rejected.Status.Message, 'preparing');
    assert.deepEqual(rejected.Status.ContainerStatus, { ContainerID: '', PID: 0, ExitCode: 0 });
  });

  it("pulls a missing image with the service's registry auth, and rejects the task without it", async () => {
    const work = await tempDir('berth-agent-reg-');
    const users = join(work, 'htpasswd');
    execFileSync('htpasswd', ['-cbB', '-C', '5', users, 'alice', 'alice-pw'], { stdio: 'ignore' });
    const reg = await startTestRegistry({ auth: { htpasswd: { realm: 'test', path: users } } });
    try {
      const host = new URL(reg.url).host;
      const ref = `${host}/team/bb:1`;
      await engine.dockerOk(['tag', 'busybox:latest', ref]);
      await engine.dockerOk(['login', '-u', 'alice', '--password-stdin', host], { input: 'alice-pw' });
      await engine.dockerOk(['push', ref]);
      await engine.dockerOk(['logout', host]);
      await engine.dockerOk(['rmi', ref]);
      const template = { ContainerSpec: { Image: ref, Command: ['sleep', '300'], StopGracePeriod: 0 } };
      const without = await putTask(await putService('noauth', template), 1);
      const rejected = await waitState(without, 'rejected', 30_000);
      assert.equal(rejected.Status.Err, `No such image: ${ref}`);
      const auth = Buffer.from(
        JSON.stringify({ username: 'alice', password: 'alice-pw', serveraddress: host }),
      );
      const svc = await putService('authed', template);
      svc._.registryAuth = auth.toString('base64');
      await store.put(keys.service(svc.ID), JSON.stringify(svc));
      const t = await putTask(svc, 1);
      await waitState(t, 'running', 30_000);
      assert.equal(await engine.dockerOk(['inspect', '-f', '{{.Config.Image}}', `authed.1.${t}`]), ref);
      await setDesired(t, 'shutdown');
      await waitState(t, 'shutdown');
    } finally {
      await reg.stop();
      await rm(work, { recursive: true, force: true });
    }
  });

  it('takes its running tasks up again after an engine kill -9 and restart', async () => {
    const svc = await putService('keep', {
      ContainerSpec: { Image: 'busybox:latest', Command: ['sleep', '300'] },
    });
    const t = await putTask(svc, 1);
    const running = await waitState(t, 'running');
    await engine.kill9();
    await engine.launch();
    store.close();
    store = new EtcdStore({ socketPath: join(engine.execRoot, 'swarm', 'etcd.sock:0') });
    // the same container keeps running; its exit is still seen and reported
    const [c] = JSON.parse(await engine.dockerOk(['inspect', `keep.1.${t}`]));
    assert.equal(c.Id, running.Status.ContainerStatus?.ContainerID);
    assert.equal(c.State.Running, true);
    await engine.dockerOk(['kill', `keep.1.${t}`]);
    const failed = await waitState(t, 'failed');
    assert.equal(failed.Status.Err, 'task: non-zero exit (137)');
  });

  it('on leave removes every task container and its secret files', async () => {
    const svc = await putService('stay', {
      ContainerSpec: {
        Image: 'busybox:latest',
        Command: ['sleep', '300'],
        Secrets: [
          { SecretID: secretId, SecretName: 's1', File: { Name: 'x', UID: '0', GID: '0', Mode: 0o444 } },
        ],
      },
    });
    const t = await putTask(svc, 1);
    await waitState(t, 'running');
    assert.equal(await engine.dockerOk(['exec', `stay.1.${t}`, 'cat', '/run/secrets/x']), 'top-secret');
    await engine.dockerOk(['swarm', 'leave', '--force']);
    assert.equal(await engine.dockerOk(['ps', '-aq', '--filter', 'label=com.docker.swarm.task.id']), '');
    assert.deepEqual(await taskMounts(), []);
  });
});
