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
import { freePort, initLoopbackSwarm } from '../../helpers/swarm-etcd.js';

/**
 * The swarm agent on a one-manager swarm (issue 14 §6): the test writes a service straight into
 * etcd (as the services API does), the orchestrator assigns its task to the node, and the node's
 * agent, over its own cluster API's assignments stream, runs it as a container with moby's names
 * and labels, the secret as a file, and reports its states forward; desired `shutdown` (an update
 * replacing the task) stops it and keeps the stopped container until the task is deleted.
 */

const id = () =>
  BigInt(`0x${randomBytes(16).toString('hex')}`)
    .toString(36)
    .padStart(25, '0')
    .slice(0, 25);

describe('swarm agent (one manager, services written into etcd)', () => {
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
    nodeId = await initLoopbackSwarm(engine, listenPort);
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

  /** A one-replica service, as the services API stores it (`shape` adds its endpoint or auth). */
  async function putService(
    name: string,
    template: TaskSpec,
    extra: Partial<ServiceSpec> = {},
    shape: (s: StoredService) => void = () => {},
  ) {
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
    shape(service);
    await store.put(keys.service(service.ID), JSON.stringify(service));
    return service;
  }

  /** The task the orchestrator made for the service's one slot, once it is on this node. */
  async function serviceTask(service: StoredService): Promise<string> {
    let found: StoredTask[] = [];
    await eventually(
      `the task of ${service.Spec.Name} assigned`,
      async () => {
        const r = await store.range(keys.tasks);
        // the service's first task, whatever it became since: one the agent rejects at once is
        // shut down and replaced, and a poll may never see it while its desired state is running
        found = r.kvs
          .map((kv) => JSON.parse(kv.value) as StoredTask)
          .filter((t) => t.ServiceID === service.ID && t.NodeID === nodeId)
          .sort((a, b) => a.CreatedAt.localeCompare(b.CreatedAt));
        return found.length > 0;
      },
      20_000,
      100,
    );
    const [t] = found;
    assert.ok(t);
    assert.equal(t.Slot, 1);
    return t.ID;
  }

  /** A changed task spec, as `docker service update --force` stores it: the rolling update. */
  async function updateService(service: StoredService): Promise<void> {
    const template = service.Spec.TaskTemplate ?? {};
    template.ForceUpdate = (template.ForceUpdate ?? 0) + 1;
    service.Spec.TaskTemplate = template;
    service._.specVersion += 1;
    await store.put(keys.service(service.ID), JSON.stringify(service));
  }

  /** The service deleted: its tasks are stopped and reaped, and their containers go. */
  async function removeService(service: StoredService): Promise<void> {
    await store.delete(keys.service(service.ID));
    await eventually(
      `the tasks of ${service.Spec.Name} reaped and their containers gone`,
      async () => {
        const r = await store.range(keys.tasks);
        const left = r.kvs.some((kv) => (JSON.parse(kv.value) as StoredTask).ServiceID === service.ID);
        const containers = await engine.dockerOk([
          'ps',
          '-aq',
          '--filter',
          `label=com.docker.swarm.service.id=${service.ID}`,
        ]);
        return !left && containers === '';
      },
      20_000,
      100,
    );
  }

  async function task(taskId: string): Promise<StoredTask> {
    const kv = await store.get(keys.task(taskId));
    assert.ok(kv, `task ${taskId} is in etcd`);
    return JSON.parse(kv.value) as StoredTask;
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
    const taskId = await serviceTask(service);
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

    // replaced by an update (stop-first): the old task is told `shutdown`
    await updateService(service);
    const down = await waitState(taskId, 'shutdown');
    assert.equal(down.DesiredState, 'shutdown');
    assert.equal(down.Status.Message, 'shutdown');
    assert.equal(down.Status.ContainerStatus?.ContainerID, c.Id);
    // its container stopped, kept for its logs as swarmkit does; its secrets tmpfs gone
    assert.equal(await engine.dockerOk(['inspect', '-f', '{{.State.Running}}', name]), 'false');
    assert.equal(await engine.dockerOk(['logs', name]), 'started');
    assert.deepEqual(
      (await taskMounts()).filter((l) => l.includes(taskId)),
      [],
      'the old task’s secrets tmpfs is gone',
    );
    await removeService(service);
    assert.deepEqual(await taskMounts(), [], 'no secrets tmpfs is left');
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
    const t = await serviceTask(svc);
    await waitState(t, 'running');
    const name = `conf.1.${t}`;
    assert.equal(await engine.dockerOk(['exec', name, 'cat', '/c1']), 'key=välue');
    assert.equal(await engine.dockerOk(['exec', name, 'stat', '-c', '%a %u %g', '/c1']), '440 1000 1001');
    assert.equal(await engine.dockerOk(['exec', name, 'cat', '/etc/app.conf']), 'key=välue');
    assert.equal(await engine.dockerOk(['exec', name, 'stat', '-c', '%a', '/etc/app.conf']), '444');
    const write = await engine.docker(['exec', name, 'sh', '-c', 'echo x > /c1']);
    assert.notEqual(write.code, 0, 'a config is read-only');
    await removeService(svc);
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
      (s) => {
        s.Endpoint = { Spec: { Ports: ports }, Ports: ports };
      },
    );
    const t = await serviceTask(svc);
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
    await removeService(svc);
  });

  it('reports an exit as complete or failed, a container killed behind its back as failed', async () => {
    // not restarted, so that each service keeps its one task
    const RestartPolicy = { Condition: 'none' as const };
    const ok = await putService('ok', {
      ContainerSpec: { Image: 'busybox:latest', Command: ['true'] },
      RestartPolicy,
    });
    const bad = await putService('bad', {
      ContainerSpec: { Image: 'busybox:latest', Command: ['sh', '-c', 'echo bad; exit 3'] },
      RestartPolicy,
    });
    const long = await putService('long', {
      ContainerSpec: { Image: 'busybox:latest', Command: ['sleep', '300'] },
      RestartPolicy,
    });
    const okTask = await serviceTask(ok);
    const badTask = await serviceTask(bad);
    const longTask = await serviceTask(long);

    const done = await waitState(okTask, 'complete');
    assert.equal(done.Status.Message, 'finished');
    assert.equal(done.Status.ContainerStatus?.ExitCode, 0);
    const failed = await waitState(badTask, 'failed');
    // dockerd 20.10's words: the message of the running state stays, the error says why
    assert.equal(failed.Status.Err, 'task: non-zero exit (3)');
    assert.equal(failed.Status.Message, 'started');
    assert.equal(failed.Status.ContainerStatus?.ExitCode, 3);
    // the orchestrator shuts the ended task down; its exited container stays (for its logs)
    // while the task is kept, and the task stays `failed`
    await eventually(
      'the failed task told shutdown',
      async () => (await task(badTask)).DesiredState === 'shutdown',
    );
    assert.equal(await engine.dockerOk(['inspect', '-f', '{{.State.ExitCode}}', `bad.1.${badTask}`]), '3');
    assert.equal(await engine.dockerOk(['logs', `bad.1.${badTask}`]), 'bad');

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
    for (const s of [ok, bad, long]) await removeService(s);
  });

  it('rejects a task whose image is missing and cannot be pulled', async () => {
    const svc = await putService('noimg', { ContainerSpec: { Image: '127.0.0.1:1/nosuch:1' } });
    const t = await serviceTask(svc);
    const rejected = await waitState(t, 'rejected', 30_000);
    assert.equal(rejected.Status.Err, 'No such image: 127.0.0.1:1/nosuch:1');
    assert.equal(rejected.Status.Message, 'preparing');
    assert.deepEqual(rejected.Status.ContainerStatus, { ContainerID: '', PID: 0, ExitCode: 0 });
    await removeService(svc);
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
      const noauth = await putService('noauth', template);
      const without = await serviceTask(noauth);
      const rejected = await waitState(without, 'rejected', 30_000);
      assert.equal(rejected.Status.Err, `No such image: ${ref}`);
      await removeService(noauth);
      const auth = Buffer.from(
        JSON.stringify({ username: 'alice', password: 'alice-pw', serveraddress: host }),
      );
      const svc = await putService('authed', template, {}, (s) => {
        s._.registryAuth = auth.toString('base64');
      });
      const t = await serviceTask(svc);
      await waitState(t, 'running', 30_000);
      assert.equal(await engine.dockerOk(['inspect', '-f', '{{.Config.Image}}', `authed.1.${t}`]), ref);
      await removeService(svc);
    } finally {
      await reg.stop();
      await rm(work, { recursive: true, force: true });
    }
  });

  it('takes its running tasks up again after an engine kill -9 and restart', async () => {
    const svc = await putService('keep', {
      ContainerSpec: { Image: 'busybox:latest', Command: ['sleep', '300'] },
    });
    const t = await serviceTask(svc);
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
    const t = await serviceTask(svc);
    await waitState(t, 'running');
    assert.equal(await engine.dockerOk(['exec', `stay.1.${t}`, 'cat', '/run/secrets/x']), 'top-secret');
    await engine.dockerOk(['swarm', 'leave', '--force']);
    assert.equal(await engine.dockerOk(['ps', '-aq', '--filter', 'label=com.docker.swarm.task.id']), '');
    assert.deepEqual(await taskMounts(), []);
  });
});
