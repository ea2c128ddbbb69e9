import { Logger } from '../../../../../src/common/log.js';
import { keys } from '../../../../../src/engine/swarm/keys.js';
import type { Clock } from '../../../../../src/engine/swarm/orchestrator/clock.js';
import type { StoredNode } from '../../../../../src/engine/swarm/orchestrator/cluster-view.js';
import {
  type Orchestrator,
  startOrchestrator,
} from '../../../../../src/engine/swarm/orchestrator/orchestrator.js';
import type { ServiceSpec, StoredService } from '../../../../../src/engine/swarm/services/service.types.js';
import { MemoryStore } from '../../../../../src/engine/swarm/store/memory-store.js';
import {
  type StoredTask,
  stateRank,
  type TaskState,
} from '../../../../../src/engine/swarm/tasks/task.types.js';

/** A clock the test moves: timers fire in order as it advances, with the promises they start. */
export class FakeClock implements Clock {
  t = Date.parse('2026-11-28T00:00:00Z');
  private timers: { at: number; fn: () => void; id: number }[] = [];
  private next = 0;

  now(): number {
    return this.t;
  }

  after(ms: number, fn: () => void): () => void {
    const id = this.next++;
    this.timers.push({ at: this.t + Math.max(0, ms), fn, id });
    return () => {
      this.timers = this.timers.filter((x) => x.id !== id);
    };
  }

  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (let i = 0; i < 10_000; i++) {
      const due = this.timers.filter((x) => x.at <= end).sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!due) break;
      this.timers = this.timers.filter((x) => x !== due);
      this.t = Math.max(this.t, due.at);
      due.fn();
      await flush();
    }
    this.t = end;
    await flush();
  }
}

export async function flush(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}

export interface NodeOpts {
  id: string;
  hostname?: string;
  role?: 'manager' | 'worker';
  availability?: 'active' | 'pause' | 'drain';
  labels?: Record<string, string>;
  engineLabels?: Record<string, string>;
  cpus?: number;
  memory?: number;
}

export function nodeRecord(o: NodeOpts): StoredNode {
  return {
    ID: o.id,
    CreatedAt: '2026-11-28T00:00:00Z',
    UpdatedAt: '2026-11-28T00:00:00Z',
    Spec: { Labels: o.labels ?? {}, Role: o.role ?? 'worker', Availability: o.availability ?? 'active' },
    Description: {
      Hostname: o.hostname ?? o.id,
      Platform: { Architecture: 'x86_64', OS: 'linux' },
      Resources: { NanoCPUs: o.cpus ?? 4e9, MemoryBytes: o.memory ?? 8 * 2 ** 30 },
      Engine: { EngineVersion: '0.1.0', Labels: o.engineLabels, Plugins: [] },
      TLSInfo: { TrustRoot: '', CertIssuerSubject: '', CertIssuerPublicKey: '' },
    },
    Status: { State: 'ready', Addr: '10.0.0.1' },
  };
}

/** A cluster in a MemoryStore with a fake clock, nodes up (liveness keys without lease), and a leader. */
export class TestCluster {
  readonly clock = new FakeClock();
  readonly store = new MemoryStore(() => this.clock.now());
  readonly orchestrators: Orchestrator[] = [];
  private ids = 0;
  private serviceSeq = 0;

  static async start(nodes: (string | NodeOpts)[], historyLimit = 5): Promise<TestCluster> {
    const c = new TestCluster();
    await c.store.put(
      keys.cluster,
      JSON.stringify({ Spec: { Orchestration: { TaskHistoryRetentionLimit: historyLimit } } }),
    );
    for (const n of nodes) await c.addNode(typeof n === 'string' ? { id: n } : n);
    c.startManager('m1');
    await c.settle();
    return c;
  }

  startManager(nodeId: string): Orchestrator {
    const o = startOrchestrator({
      store: this.store,
      nodeId,
      clock: this.clock,
      log: new Logger('error'),
      newId: () => `t${String(++this.ids).padStart(4, '0')}`,
    });
    this.orchestrators.push(o);
    return o;
  }

  async addNode(o: NodeOpts): Promise<void> {
    await this.store.put(keys.node(o.id), JSON.stringify(nodeRecord(o)));
    await this.store.put(keys.live(o.id), '10.0.0.1');
  }

  async updateNode(id: string, change: (n: StoredNode) => void): Promise<void> {
    const kv = await this.store.get(keys.node(id));
    const n = JSON.parse(kv?.value ?? '{}') as StoredNode;
    change(n);
    await this.store.put(keys.node(id), JSON.stringify(n));
    await this.settle();
  }

  async nodeDown(id: string): Promise<void> {
    await this.store.delete(keys.live(id));
    await this.settle();
  }

  async nodeUp(id: string): Promise<void> {
    await this.store.put(keys.live(id), '10.0.0.1');
    await this.settle();
  }

  async createService(spec: ServiceSpec): Promise<string> {
    const id = `s${++this.serviceSeq}`;
    const s: StoredService = {
      ID: id,
      CreatedAt: new Date(this.clock.now()).toISOString(),
      UpdatedAt: new Date(this.clock.now()).toISOString(),
      Spec: spec,
      Endpoint: {},
      _: { specVersion: 1 },
    };
    await this.store.put(keys.service(id), JSON.stringify(s));
    await this.settle();
    return id;
  }

  async service(id: string): Promise<StoredService> {
    const kv = await this.store.get(keys.service(id));
    return JSON.parse(kv?.value ?? 'null') as StoredService;
  }

  /** An update through the API: the spec changed, the previous kept, `_.specVersion` bumped when `replaces`. */
  async updateService(id: string, change: (spec: ServiceSpec) => void, replaces = true): Promise<void> {
    const s = await this.service(id);
    s.PreviousSpec = structuredClone(s.Spec);
    change(s.Spec);
    if (replaces) s._.specVersion++;
    await this.store.put(keys.service(id), JSON.stringify(s));
    await this.settle();
  }

  async removeService(id: string): Promise<void> {
    await this.store.delete(keys.service(id));
    await this.settle();
  }

  async tasks(serviceId?: string): Promise<StoredTask[]> {
    const r = await this.store.range(keys.tasks);
    return r.kvs
      .map((kv) => JSON.parse(kv.value) as StoredTask)
      .filter((t) => !serviceId || t.ServiceID === serviceId)
      .sort(
        (a, b) =>
          (a.Slot ?? 0) - (b.Slot ?? 0) || (a.CreatedAt < b.CreatedAt ? -1 : 1) || (a.ID < b.ID ? -1 : 1),
      );
  }

  async liveTasks(serviceId?: string): Promise<StoredTask[]> {
    return (await this.tasks(serviceId)).filter((t) => stateRank(t.DesiredState) <= stateRank('running'));
  }

  /** What an agent does: a forward-only status report, compare-and-swap on the task's revision. */
  async report(
    taskId: string,
    state: TaskState,
    extra: { Err?: string; ExitCode?: number } = {},
  ): Promise<void> {
    for (let i = 0; i < 5; i++) {
      const kv = await this.store.get(keys.task(taskId));
      if (!kv) return;
      const t = JSON.parse(kv.value) as StoredTask;
      if (stateRank(state) <= stateRank(t.Status.State)) return;
      t.Status = {
        ...t.Status,
        State: state,
        Timestamp: new Date(this.clock.now()).toISOString(),
        Message: state,
        ...(extra.Err ? { Err: extra.Err } : {}),
        ...(extra.ExitCode !== undefined ? { ContainerStatus: { ExitCode: extra.ExitCode } } : {}),
      };
      const res = await this.store.txn(
        [{ key: kv.key, target: 'mod', op: 'equal', value: kv.modRevision }],
        [{ put: { key: kv.key, value: JSON.stringify(t) } }],
      );
      if (res.succeeded) break;
    }
    await this.settle();
  }

  /** Every agent: assigned tasks desired to run start running; tasks told to stop report shutdown. */
  async agentsRun(): Promise<void> {
    for (const t of await this.tasks()) {
      const desired = stateRank(t.DesiredState);
      if (desired <= stateRank('running') && t.Status.State === 'assigned')
        await this.report(t.ID, 'running');
      else if (
        desired > stateRank('running') &&
        stateRank(t.Status.State) < stateRank('complete') &&
        t.NodeID
      )
        await this.report(t.ID, 'shutdown');
    }
    await this.settle();
  }

  async fail(taskId: string, exitCode = 137): Promise<void> {
    await this.report(taskId, 'failed', { Err: `task: non-zero exit (${exitCode})`, ExitCode: exitCode });
  }

  async settle(): Promise<void> {
    for (let i = 0; i < 5; i++) {
      await flush();
      for (const o of this.orchestrators) await o.settled();
    }
    await flush();
  }

  async advance(ms: number): Promise<void> {
    await this.clock.advance(ms);
    await this.settle();
  }

  async stop(): Promise<void> {
    for (const o of this.orchestrators) await o.stop();
  }
}

/** Running tasks per node, e.g. { n1: 10, n2: 10 }. */
export function perNode(tasks: readonly StoredTask[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const t of tasks) if (t.NodeID) out[t.NodeID] = (out[t.NodeID] ?? 0) + 1;
  return out;
}
