import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { notFound, notModified } from '../../../../../src/common/errors.js';
import { Logger } from '../../../../../src/common/log.js';
import type { AgentContainers } from '../../../../../src/engine/swarm/agent/executor.js';
import { NodeAgent } from '../../../../../src/engine/swarm/agent/node-agent.js';
import type { OverlayPort } from '../../../../../src/engine/swarm/agent/overlay-port.js';
import { TaskFiles } from '../../../../../src/engine/swarm/agent/task-files.js';
import type { HealthEvents } from '../../../../../src/engine/swarm/agent/task-health.js';
import type {
  AssignedTask,
  AssignmentMessage,
  StatusCall,
} from '../../../../../src/engine/swarm/cluster-api/assignments.types.js';
import type { TaskState, TaskStatus } from '../../../../../src/engine/swarm/tasks/task.types.js';
import { eventually } from '../../../../helpers/eventually.js';

/** The engine's containers, in memory: what the agent did to them, in order. */
class FakeContainers {
  readonly ops: string[] = [];
  readonly byName = new Map<
    string,
    {
      id: string;
      labels: Record<string, string>;
      running: boolean;
      exit: number;
      healthcheck?: unknown;
      health?: 'starting' | 'healthy' | 'unhealthy';
    }
  >();
  /** The health_status listeners, by container ID. */
  readonly healthListeners = new Map<string, Set<(s: 'starting' | 'healthy' | 'unhealthy') => void>>();

  /** The container's health check reports a new status (its `health_status` event). */
  health(name: string, status: 'starting' | 'healthy' | 'unhealthy'): void {
    const c = this.find(name);
    c.health = status;
    for (const l of this.healthListeners.get(c.id) ?? []) l(status);
  }

  readonly healthEvents: HealthEvents = (id, listener) => {
    const set = this.healthListeners.get(id) ?? new Set();
    set.add(listener);
    this.healthListeners.set(id, set);
    return () => set.delete(listener);
  };
  private readonly waiters = new Map<string, ((code: number) => void)[]>();
  private next = 0;

  find(ref: string) {
    const c = this.byName.get(ref) ?? [...this.byName.values()].find((x) => x.id === ref);
    if (!c) throw notFound(`No such container: ${ref}`);
    return c;
  }

  /** The container's process ends (on its own or killed). */
  exit(name: string, code: number): void {
    const c = this.find(name);
    c.running = false;
    c.exit = code;
    for (const w of this.waiters.get(c.id) ?? []) w(code);
    this.waiters.delete(c.id);
  }

  readonly api: AgentContainers = {
    create: async (req) => {
      const id = `c${++this.next}`;
      this.byName.set(req.name ?? id, {
        id,
        labels: req.config.Labels ?? {},
        running: false,
        exit: 0,
        healthcheck: req.config.Healthcheck,
      });
      this.ops.push(`create ${req.name}`);
      return { Id: id, Warnings: [] };
    },
    start: async (ref) => {
      const c = this.find(ref);
      if (c.running) throw new Error('already started');
      c.running = true;
      if (c.healthcheck) c.health = 'starting';
      this.ops.push(`start ${ref}`);
    },
    stop: async (ref) => {
      const c = this.find(ref);
      this.ops.push(`stop ${ref}`);
      // as the engine: a container that is not running is not modified (304)
      if (!c.running) throw notModified();
      const name = [...this.byName.entries()].find(([, v]) => v === c)?.[0] ?? ref;
      if (c.running) this.exit(name, 143);
    },
    remove: async (ref) => {
      const c = this.find(ref);
      for (const [name, v] of this.byName) if (v === c) this.byName.delete(name);
      this.ops.push(`remove ${ref}`);
    },
    inspect: async (ref) => {
      const c = this.find(ref);
      return {
        Id: c.id,
        State: {
          Running: c.running,
          Pid: c.running ? 100 : 0,
          ExitCode: c.exit,
          ...(c.health ? { Health: { Status: c.health, FailingStreak: 0, Log: [] } } : {}),
        },
        Config: { ...(c.healthcheck ? { Healthcheck: c.healthcheck } : {}) },
        NetworkSettings: { Ports: {} },
      } as never;
    },
    list: async () => [...this.byName.values()].map((c) => ({ Id: c.id, Labels: c.labels })) as never,
    wait: async (ref, _condition, signal) => {
      const c = this.find(ref);
      return () =>
        new Promise((resolve, reject) => {
          if (_condition === 'not-running' && !c.running) return resolve({ StatusCode: c.exit, Error: null });
          const list = this.waiters.get(c.id) ?? [];
          list.push((code) => resolve({ StatusCode: code, Error: null }));
          this.waiters.set(c.id, list);
          signal?.addEventListener('abort', () => reject(new Error('aborted')));
        });
    },
  };
}

function assigned(id: string, state: TaskState = 'assigned', desired: TaskState = 'running'): AssignedTask {
  return {
    Task: {
      ID: id,
      CreatedAt: '',
      UpdatedAt: '',
      Labels: {},
      Spec: { ContainerSpec: { Image: 'busybox', Command: ['sleep', '9'] } },
      ServiceID: 's1',
      Slot: 1,
      NodeID: 'n1',
      Status: { Timestamp: '', State: state, Message: '' },
      DesiredState: desired,
    },
    Service: { ID: 's1', Name: 'web', Labels: {}, HostPorts: [] },
  };
}

const dirs: string[] = [];
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

/** The node's overlay data plane, in memory: which tasks are plugged, what was asked of it. */
class FakeOverlay {
  readonly plugged = new Set<string>();
  readonly ops: string[] = [];
  readonly port: OverlayPort = {
    sync: async () => {},
    gatewayAddress: async () => '172.18.0.1',
    attach: async (t) => {
      this.plugged.add(t.taskId);
      this.ops.push(`attach ${t.taskId}`);
    },
    plugOne: async () => {},
    unplugOne: async () => {},
    detach: async (id) => {
      this.plugged.delete(id);
      this.ops.push(`detach ${id}`);
    },
    attached: (id) => this.plugged.has(id),
    knows: () => true,
    vipsFor: () => [],
    sweep: async () => {},
  };
}

async function setup(missing = new Set<string>(), down = new Set<string>(), overlay?: OverlayPort) {
  const dir = await mkdtemp(join(tmpdir(), 'berth-agent-'));
  dirs.push(dir);
  const containers = new FakeContainers();
  const reports: { id: string; status: TaskStatus }[] = [];
  let push: (m: AssignmentMessage) => void = () => {};
  let end: () => void = () => {};
  let connects = 0;
  const tried: string[] = [];
  const reportedTo = new Set<string>();
  const agent = new NodeAgent({
    stateDir: dir,
    containers: containers.api,
    images: {
      resolve: async (ref) => {
        if (missing.has(ref)) throw notFound(`No such image: ${ref}`);
        return { id: `sha256:${ref}` } as never;
      },
    },
    files: new TaskFiles(join(dir, 'tasks'), {
      mount: async () => {},
      unmount: async () => {},
      mountsUnder: async () => [],
    }),
    hostname: () => 'h1',
    log: new Logger('error'),
    connect: (addr, _tls, onMessage) => {
      tried.push(addr);
      if (down.has(addr)) {
        return {
          done: Promise.reject(new Error(`cannot reach ${addr}`)),
          setIdle: () => {},
          close: () => {},
        };
      }
      connects++;
      push = onMessage;
      return {
        done: new Promise<void>((resolve) => {
          end = resolve;
        }),
        setIdle: () => {},
        close: () => end(),
      };
    },
    postStatus: async (addr, call: StatusCall) => {
      if (down.has(addr)) throw new Error(`cannot reach ${addr}`);
      reportedTo.add(addr);
      for (const u of call.Updates) reports.push({ id: u.TaskID, status: u.Status });
      return { Applied: call.Updates.map((u) => u.TaskID) };
    },
    backoffMs: { first: 1, max: 5 },
    health: containers.healthEvents,
    ...(overlay ? { overlay } : {}),
  });
  await agent.start({
    nodeId: 'n1',
    tls: async () => ({ ca: '', cert: '', key: '' }),
    managers: () => [
      { NodeID: 'm1', Addr: 'm1:2377' },
      { NodeID: 'm2', Addr: 'm2:2377' },
    ],
  });
  await eventually('the agent connects', () => connects > 0);
  const full = (tasks: AssignedTask[]) =>
    push({ type: 'full', tasks, secrets: [], configs: [], managers: [], periodMs: 1000 });
  const states = (id: string) => reports.filter((r) => r.id === id).map((r) => r.status.State);
  return {
    agent,
    tried,
    reportedTo,
    containers,
    reports,
    full,
    states,
    push: (m: AssignmentMessage) => push(m),
    reconnect: async () => {
      const before = connects;
      end();
      await eventually('the agent reconnects', () => connects > before);
    },
  };
}

describe('node agent', () => {
  it('holds a task with a health check in starting until healthy, and fails it when unhealthy', async () => {
    const t = await setup();
    const task = assigned('t1');
    task.Task.Spec.ContainerSpec = {
      Image: 'busybox',
      Command: ['sleep', '9'],
      Healthcheck: { Test: ['CMD-SHELL', 'true'] },
    };
    t.full([task]);
    await eventually('t1 starting', () => t.states('t1').includes('starting'));
    // the manager's set again while it starts: no second start, still not running
    t.push({
      type: 'changes',
      tasks: [assigned('t1', 'starting')].map((a) => ({ ...a, Task: { ...a.Task, Spec: task.Task.Spec } })),
      removed: [],
      secrets: [],
      configs: [],
      removedSecrets: [],
      removedConfigs: [],
    });
    await t.agent.idle();
    assert.ok(!t.states('t1').includes('running'));
    assert.deepEqual(t.containers.ops, ['create web.1.t1', 'start c1']);

    t.containers.health('web.1.t1', 'healthy');
    await eventually('t1 running once healthy', () => t.states('t1').includes('running'));
    t.containers.health('web.1.t1', 'unhealthy');
    await eventually('t1 failed', () => t.states('t1').includes('failed'));
    const failed = t.reports.find((r) => r.id === 't1' && r.status.State === 'failed');
    assert.equal(failed?.status.Err, 'task: non-zero exit (143): dockerexec: unhealthy container');
    assert.deepEqual(t.containers.ops, ['create web.1.t1', 'start c1', 'stop c1']);
    assert.equal(t.containers.healthListeners.get('c1')?.size ?? 0, 0, 'no listener left');
    await t.agent.stop();
  });

  it('unplugs a task that failed unhealthy once it is shut down (its container stopped already)', async () => {
    const overlay = new FakeOverlay();
    const t = await setup(undefined, undefined, overlay.port);
    const task = assigned('t1');
    task.Task.Spec.ContainerSpec = {
      Image: 'busybox',
      Command: ['sleep', '9'],
      Healthcheck: { Test: ['CMD-SHELL', 'true'] },
    };
    task.Task.NetworksAttachments = [{ Network: { ID: 'ov1' }, Addresses: ['10.0.1.5/24'] }] as never;
    t.full([task]);
    await eventually('t1 starting', () => t.states('t1').includes('starting'));
    t.containers.health('web.1.t1', 'healthy');
    await eventually('t1 running', () => t.states('t1').includes('running'));
    assert.ok(overlay.plugged.has('t1'));
    t.containers.health('web.1.t1', 'unhealthy');
    await eventually('t1 failed', () => t.states('t1').includes('failed'));
    // the managers answer a failure with a desired shutdown: the stop finds the container stopped
    t.push({
      type: 'changes',
      tasks: [{ ...assigned('t1', 'failed', 'shutdown'), Task: { ...task.Task, DesiredState: 'shutdown' } }],
      removed: [],
      secrets: [],
      configs: [],
      removedSecrets: [],
      removedConfigs: [],
    });
    await eventually('t1 out of its networks', () => !overlay.plugged.has('t1'));
    assert.deepEqual(overlay.ops, ['attach t1', 'detach t1']);
    await t.agent.stop();
  });

  it('runs a task to running, reports its exit as failed, and never reports backwards', async () => {
    const t = await setup();
    t.full([assigned('t1')]);
    await eventually('t1 running', () => t.states('t1').includes('running'));
    assert.deepEqual(t.containers.ops, ['create web.1.t1', 'start c1']);
    t.containers.exit('web.1.t1', 2);
    await eventually('t1 failed', () => t.states('t1').includes('failed'));
    const failed = t.reports.find((r) => r.id === 't1' && r.status.State === 'failed');
    assert.equal(failed?.status.Err, 'task: non-zero exit (2)');
    assert.deepEqual(failed?.status.ContainerStatus, { ContainerID: 'c1', PID: 0, ExitCode: 2 });
    // each state at most once, in order
    const seen = t.states('t1');
    assert.deepEqual(seen, [...new Set(seen)]);
    // the manager echoes an older state: nothing moves back, nothing restarts
    t.push({
      type: 'changes',
      tasks: [assigned('t1', 'running')],
      removed: [],
      secrets: [],
      configs: [],
      removedSecrets: [],
      removedConfigs: [],
    });
    await t.agent.idle();
    assert.deepEqual(t.containers.ops, ['create web.1.t1', 'start c1']);
    await t.agent.stop();
  });

  it('stops on desired shutdown and reports shutdown; the container goes with the task', async () => {
    const t = await setup();
    t.full([assigned('t1')]);
    await eventually('t1 running', () => t.states('t1').includes('running'));
    t.push({
      type: 'changes',
      tasks: [assigned('t1', 'running', 'shutdown')],
      removed: [],
      secrets: [],
      configs: [],
      removedSecrets: [],
      removedConfigs: [],
    });
    await eventually('t1 shutdown', () => t.states('t1').includes('shutdown'));
    await t.agent.idle();
    // the stopped container stays for its logs while the task is this node's (swarmkit)
    assert.deepEqual(t.containers.ops, ['create web.1.t1', 'start c1', 'stop c1']);
    assert.ok(!t.states('t1').includes('failed'), 'a stop asked for is no failure');
    t.push({
      type: 'changes',
      tasks: [],
      removed: ['t1'],
      secrets: [],
      configs: [],
      removedSecrets: [],
      removedConfigs: [],
    });
    await eventually('t1 container removed', () => t.containers.ops.includes('remove c1'));
    await t.agent.stop();
  });

  it('on a reconnect removes the containers of tasks it no longer has before anything else', async () => {
    const t = await setup();
    t.full([assigned('old')]);
    await eventually('old running', () => t.states('old').includes('running'));
    // a container of a task this engine knows nothing of (left from before)
    await t.containers.api.create({
      name: 'web.2.ghost',
      config: { Labels: { 'com.docker.swarm.task.id': 'ghost' } },
    } as never);
    await t.reconnect();
    t.containers.ops.length = 0;
    t.full([assigned('new')]);
    await eventually('new running', () => t.states('new').includes('running'));
    const createAt = t.containers.ops.indexOf('create web.1.new');
    assert.ok(createAt > t.containers.ops.indexOf('remove c1'), t.containers.ops.join(', '));
    assert.ok(createAt > t.containers.ops.indexOf('remove c2'), t.containers.ops.join(', '));
    assert.ok(t.containers.ops.includes('remove c1') && t.containers.ops.includes('remove c2'));
    await t.agent.stop();
  });

  it('goes no further than a desired `ready` until told to run', async () => {
    const t = await setup();
    t.full([assigned('t1', 'assigned', 'ready')]);
    await eventually('t1 ready', () => t.states('t1').includes('ready'));
    await t.agent.idle();
    assert.deepEqual(t.containers.ops, ['create web.1.t1']);
    t.push({
      type: 'changes',
      tasks: [assigned('t1', 'ready', 'running')],
      removed: [],
      secrets: [],
      configs: [],
      removedSecrets: [],
      removedConfigs: [],
    });
    await eventually('t1 running', () => t.states('t1').includes('running'));
    assert.deepEqual(t.containers.ops, ['create web.1.t1', 'start c1']);
    await t.agent.stop();
  });

  it('moves on to the next manager when one cannot be reached, and reports there', async () => {
    const t = await setup(new Set(), new Set(['m1:2377']));
    assert.deepEqual(t.tried.slice(0, 2), ['m1:2377', 'm2:2377']);
    t.full([assigned('t1')]);
    await eventually('t1 running', () => t.states('t1').includes('running'));
    assert.deepEqual([...t.reportedTo], ['m2:2377']);
    await t.agent.stop();
  });

  it('rejects a task whose image is missing', async () => {
    const t = await setup();
    const a = assigned('t1');
    (a.Task.Spec.ContainerSpec as { Image: string }).Image = 'nosuch:1';
    const agentImages = t.agent as unknown as {
      opts: { images: { resolve: (r: string) => Promise<never> } };
    };
    agentImages.opts.images.resolve = async (ref) => {
      throw notFound(`No such image: ${ref}`);
    };
    t.full([a]);
    await eventually('t1 rejected', () => t.states('t1').includes('rejected'));
    const r = t.reports.find((x) => x.status.State === 'rejected');
    assert.equal(r?.status.Err, 'No such image: nosuch:1');
    assert.deepEqual(t.containers.ops, []);
    await t.agent.stop();
  });
});
