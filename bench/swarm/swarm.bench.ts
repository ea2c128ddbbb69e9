/**
 * Swarm benchmark (issue 14): berth (1 manager + 2 workers) beside Debian's dockerd 20.10 run the
 * same way, each host a network namespace on one switch bridge (test/helpers/swarm-netns.ts).
 *
 *   node --import tsx bench/swarm/swarm.bench.ts [--repetitions 3] [--replicas 30] [--systems berth,dockerd]
 *        [--scenarios workers,leader]
 *
 * Per repetition and system, alternating systems: three fresh engines with busybox imported,
 * `POST /swarm/init` timed (heartbeat 1 s), two workers joined, RSS idle, converge (service of
 * `--replicas` `sleep` tasks, restart delay 0, to all running, polling GET /tasks every 100 ms),
 * RSS with the tasks, a rolling update (parallelism 10) to UpdateStatus completed, then worker 3's
 * link cut: time to its node `down` and to all replicas running off it. Medians are printed.
 * Everything started is ended by pid and removed (namespaces, data dirs), also on SIGINT/SIGTERM;
 * every wait is bounded. Build first (`npm run build`): berth runs from dist/.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BUSYBOX_CHANGES, busyboxTarball } from '../../test/helpers/busybox.js';
import { NsEngine, TestNetwork } from '../../test/helpers/swarm-netns.js';
import { EngineClient } from '../engine/client.js';
import { median } from '../engine/stats.js';
import { NsDockerd } from './ns-dockerd.js';

type SystemName = 'berth' | 'dockerd';

interface Options {
  repetitions: number;
  scenarios: string[];
  replicas: number;
  systems: SystemName[];
}

function parseOptions(argv: string[]): Options {
  const o: Options = {
    repetitions: 3,
    scenarios: ['workers', 'leader'],
    replicas: 30,
    systems: ['berth', 'dockerd'],
  };
  for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1] ?? ''];
    if (k === '--repetitions') o.repetitions = Number(v);
    else if (k === '--scenarios') o.scenarios = v.split(',');
    else if (k === '--replicas') o.replicas = Number(v);
    else if (k === '--systems') o.systems = v.split(',').map((s) => (s === 'dockerd' ? 'dockerd' : 'berth'));
    else throw new Error(`unknown option ${k}`);
  }
  return o;
}

/** One engine on one host, whichever system. */
interface Host {
  socket: string;
  hostname: string;
  /** The pids whose RSS counts as the engine's: berth + its etcd member, dockerd + containerd. */
  enginePids(): Promise<number[]>;
  destroy(): Promise<void>;
}

interface Figures {
  initMs: number;
  convergeMs: number;
  updateMs: number;
  downMs: number;
  rescheduleMs: number;
  rssIdleMiB: number;
  rssTasksMiB: number;
  managerRssIdleMiB: number;
  managerRssTasksMiB: number;
  /** From the create request (wall clock) to the last task record's CreatedAt: the orchestrator. */
  lastTaskCreatedMs: number;
  /** ... to the first and the last task's `running` timestamp: the agents' start path. */
  firstRunningMs: number;
  lastRunningMs: number;
}

const NS = 1e9;
const cleanups = new Set<() => Promise<void>>();

async function pidsMatching(match: (argv: string[]) => boolean): Promise<number[]> {
  const out: number[] = [];
  const { readdir } = await import('node:fs/promises');
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const argv = (await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (match(argv)) out.push(Number(name));
  }
  return out;
}

async function rssKiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
  return m ? Number(m[1]) : 0;
}

async function startHost(system: SystemName, netns: string, hostname: string): Promise<Host> {
  if (system === 'dockerd') {
    const d = await NsDockerd.start(netns, hostname);
    return {
      socket: d.socket,
      hostname,
      enginePids: async () => [d.pid, await d.containerdPid()].filter((p): p is number => p !== undefined),
      destroy: () => d.destroy(),
    };
  }
  const e = await NsEngine.start(netns, hostname);
  return {
    socket: e.socket,
    hostname,
    enginePids: async () => {
      const engine = await pidsMatching(
        (a) => a.some((x) => x.endsWith('dist/cli/main.js')) && a.includes(`unix://${e.socket}`),
      );
      const etcd = await readFile(join(e.dir, 'exec', 'swarm', 'etcd.pid'), 'utf8').catch(() => '');
      return [...engine, ...(/^\d+$/.test(etcd.trim()) ? [Number(etcd.trim())] : [])];
    },
    destroy: () => e.destroy(),
  };
}

async function rssMiB(hosts: Host[]): Promise<number> {
  let kib = 0;
  for (const h of hosts) for (const pid of await h.enginePids()) kib += await rssKiB(pid);
  return kib / 1024;
}

async function json<T>(c: EngineClient, method: string, path: string, body?: unknown): Promise<T> {
  const text = (await c.ok(method, path, body)).toString();
  return (text ? JSON.parse(text) : undefined) as T;
}

/** Polls `check` every 100 ms until true; the elapsed ms from `t0`. Throws after `limitMs`. */
async function until(
  what: string,
  t0: number,
  limitMs: number,
  check: () => Promise<boolean>,
): Promise<number> {
  while (performance.now() - t0 < limitMs) {
    if (await check()) return performance.now() - t0;
    await sleep(100);
  }
  throw new Error(`${what}: not within ${limitMs} ms`);
}

interface TaskView {
  CreatedAt: string;
  NodeID?: string;
  DesiredState: string;
  Status: { State: string; Timestamp: string };
  Spec: { ContainerSpec?: { Env?: string[] } };
}
interface NodeView {
  ID: string;
  Description: { Hostname: string };
  Status: { State: string };
}
interface ServiceView {
  Version: { Index: number };
  Spec: { TaskTemplate: { ContainerSpec: { Env?: string[] } } } & Record<string, unknown>;
  UpdateStatus?: { State: string };
}

const tasksOf = (c: EngineClient, id: string): Promise<TaskView[]> =>
  json<TaskView[]>(c, 'GET', `/v1.41/tasks?filters=${encodeURIComponent(JSON.stringify({ service: [id] }))}`);

const running = (tasks: TaskView[], env?: string, off?: string): number =>
  tasks.filter(
    (t) =>
      t.DesiredState === 'running' &&
      t.Status.State === 'running' &&
      (off === undefined || t.NodeID !== off) &&
      (env === undefined || (t.Spec.ContainerSpec?.Env ?? []).includes(env)),
  ).length;

interface Cluster {
  net: TestNetwork;
  hosts: Host[];
  clients: [EngineClient, EngineClient, EngineClient];
  initMs: number;
  rssIdleMiB: number;
  managerRssIdleMiB: number;
}

/**
 * Three fresh engines of `system` in three namespaces, busybox imported on each, `swarm init` on
 * host 1 (timed; heartbeat 1 s) and hosts 2 and 3 joined as workers or managers, all ready; then
 * `use(cluster)`. Everything is removed after, and on SIGINT/SIGTERM meanwhile.
 */
async function withCluster<T>(
  system: SystemName,
  role: 'worker' | 'manager',
  use: (c: Cluster) => Promise<T>,
): Promise<T> {
  const net = await TestNetwork.create(3, '192.168.213');
  const hosts: Host[] = [];
  const clients: EngineClient[] = [];
  const cleanup = async (): Promise<void> => {
    for (let i = 1; i <= 3; i++) await net.link(i, 'up').catch(() => undefined);
    for (const c of clients) c.close();
    await Promise.all(hosts.slice(1).map((h) => h.destroy().catch(() => undefined)));
    await hosts[0]?.destroy().catch(() => undefined);
    await net.destroy();
  };
  cleanups.add(cleanup);
  try {
    for (let i = 1; i <= 3; i++) hosts.push(await startHost(system, net.hosts[i - 1] ?? '', `host${i}`));
    for (const h of hosts) clients.push(new EngineClient(h.socket));
    const [m, ...others] = clients as [EngineClient, EngineClient, EngineClient];
    const tar = await busyboxTarball();
    const tarBytes = await readFile(tar);
    const changes = BUSYBOX_CHANGES.filter((_, i) => i % 2 === 1)
      .map((c) => `&changes=${encodeURIComponent(c)}`)
      .join('');
    await Promise.all(
      clients.map((c) =>
        c.ok('POST', `/v1.41/images/create?fromSrc=-&repo=busybox&tag=latest${changes}`, tarBytes),
      ),
    );

    const t0 = performance.now();
    await m.ok('POST', '/v1.41/swarm/init', {
      ListenAddr: `${net.address(1)}:2377`,
      AdvertiseAddr: net.address(1),
      Spec: { Dispatcher: { HeartbeatPeriod: 1 * NS } },
    });
    const initMs = performance.now() - t0;
    const swarm = await json<{ JoinTokens: { Worker: string; Manager: string } }>(m, 'GET', '/v1.41/swarm');
    for (const [i, w] of others.entries()) {
      await w.ok('POST', '/v1.41/swarm/join', {
        ListenAddr: `${net.address(i + 2)}:2377`,
        AdvertiseAddr: net.address(i + 2),
        RemoteAddrs: [`${net.address(1)}:2377`],
        JoinToken: role === 'manager' ? swarm.JoinTokens.Manager : swarm.JoinTokens.Worker,
      });
    }
    await until('3 nodes ready', performance.now(), 60_000, async () => {
      const nodes = await json<NodeView[]>(m, 'GET', '/v1.41/nodes');
      return nodes.filter((n) => n.Status.State === 'ready').length === 3;
    });
    await sleep(2000);
    const rssIdleMiB = await rssMiB(hosts);
    const managerRssIdleMiB = await rssMiB(hosts.slice(0, 1));
    const cluster: Cluster = {
      net,
      hosts,
      clients: clients as [EngineClient, EngineClient, EngineClient],
      initMs,
      rssIdleMiB,
      managerRssIdleMiB,
    };
    const out = await use(cluster);
    // the service's containers go before the engines stop
    await until('containers removed', performance.now(), 90_000, async () => {
      for (const c of clients) {
        const list = await json<unknown[]>(c, 'GET', '/v1.41/containers/json?all=1');
        if (list.length > 0) return false;
      }
      return true;
    }).catch((err: Error) => process.stderr.write(`${system}: ${err.message}\n`));
    for (const c of [...others, m]) await c.call('POST', '/v1.41/swarm/leave?force=1').catch(() => undefined);
    return out;
  } finally {
    await cleanup();
    cleanups.delete(cleanup);
  }
}

function serviceSpec(replicas: number): Record<string, unknown> {
  return {
    Name: 'bench',
    TaskTemplate: {
      ContainerSpec: { Image: 'busybox:latest', Command: ['sleep', '86400'], Env: ['V=0'] },
      RestartPolicy: { Condition: 'any', Delay: 0 },
    },
    Mode: { Replicated: { Replicas: replicas } },
    UpdateConfig: { Parallelism: 10, Delay: 0, FailureAction: 'pause', Order: 'stop-first' },
  };
}

const workersRun = (system: SystemName, o: Options): Promise<Figures> =>
  withCluster(system, 'worker', async ({ net, hosts, clients, initMs, rssIdleMiB, managerRssIdleMiB }) => {
    const [m] = clients;
    let t0: number;
    // converge
    const wall0 = Date.now();
    t0 = performance.now();
    const { ID: id } = await json<{ ID: string }>(
      m,
      'POST',
      '/v1.41/services/create',
      serviceSpec(o.replicas),
    );
    const convergeMs = await until(
      'converge',
      t0,
      180_000,
      async () => running(await tasksOf(m, id)) === o.replicas,
    );
    const converged = (await tasksOf(m, id)).filter((t) => t.Status.State === 'running');
    const after = (stamps: number[], pick: (...v: number[]) => number): number => pick(...stamps) - wall0;
    const lastTaskCreatedMs = after(
      converged.map((t) => Date.parse(t.CreatedAt)),
      Math.max,
    );
    const firstRunningMs = after(
      converged.map((t) => Date.parse(t.Status.Timestamp)),
      Math.min,
    );
    const lastRunningMs = after(
      converged.map((t) => Date.parse(t.Status.Timestamp)),
      Math.max,
    );
    await sleep(2000);
    const rssTasksMiB = await rssMiB(hosts);
    const managerRssTasksMiB = await rssMiB(hosts.slice(0, 1));

    // rolling update, parallelism 10
    const current = await json<ServiceView>(m, 'GET', `/v1.41/services/${id}`);
    const next = structuredClone(current.Spec);
    next.TaskTemplate.ContainerSpec.Env = ['V=1'];
    t0 = performance.now();
    await m.ok('POST', `/v1.41/services/${id}/update?version=${current.Version.Index}`, next);
    const updateMs = await until('rolling update', t0, 240_000, async () => {
      const s = await json<ServiceView>(m, 'GET', `/v1.41/services/${id}`);
      return s.UpdateStatus?.State === 'completed';
    });
    await until('updated tasks running', performance.now(), 120_000, async () => {
      return running(await tasksOf(m, id), 'V=1') === o.replicas;
    });

    // reschedule after worker 3's link is cut
    const nodes = await json<NodeView[]>(m, 'GET', '/v1.41/nodes');
    const cut = nodes.find((n) => n.Description.Hostname === 'host3')?.ID;
    if (!cut) throw new Error('no node host3');
    let downMs = Number.NaN;
    t0 = performance.now();
    await net.link(3, 'down');
    const rescheduleMs = await until('reschedule', t0, 120_000, async () => {
      if (Number.isNaN(downMs)) {
        const n = await json<NodeView>(m, 'GET', `/v1.41/nodes/${cut}`);
        if (n.Status.State === 'down') downMs = performance.now() - t0;
      }
      return !Number.isNaN(downMs) && running(await tasksOf(m, id), 'V=1', cut) === o.replicas;
    });
    await net.link(3, 'up');

    await m.ok('DELETE', `/v1.41/services/${id}`);
    return {
      initMs,
      convergeMs,
      updateMs,
      downMs,
      rescheduleMs,
      rssIdleMiB,
      rssTasksMiB,
      managerRssIdleMiB,
      managerRssTasksMiB,
      lastTaskCreatedMs,
      firstRunningMs,
      lastRunningMs,
    };
  });

interface LeaderFigures {
  writesMs: number;
  downMs: number;
  rescheduleMs: number;
}

/** `p`, or undefined when it has not settled within `ms` (or failed). */
const within = <T>(p: Promise<T>, ms: number): Promise<T | undefined> =>
  Promise.race([p.catch(() => undefined), sleep(ms).then(() => undefined)]);

/**
 * Three managers; the service converged, the leader's (host 1's) link is cut. From the cut: the
 * first write a survivor completes (a config created, one attempt every 500 ms, alternating
 * survivors, without waiting for earlier ones: a write that hangs through the election counts
 * when it completes), the old leader's node `down`, and all replicas running off it, as seen by
 * host 2.
 */
const leaderRun = (system: SystemName, o: Options): Promise<LeaderFigures> =>
  withCluster(system, 'manager', async ({ net, clients }) => {
    const [m, s2, s3] = clients;
    const { ID: id } = await json<{ ID: string }>(
      m,
      'POST',
      '/v1.41/services/create',
      serviceSpec(o.replicas),
    );
    await until(
      'converge',
      performance.now(),
      180_000,
      async () => running(await tasksOf(m, id)) === o.replicas,
    );
    const nodes = await json<NodeView[]>(m, 'GET', '/v1.41/nodes');
    const cut = nodes.find((n) => n.Description.Hostname === 'host1')?.ID;
    if (!cut) throw new Error('no node host1');
    let writesMs = Number.NaN;
    let downMs = Number.NaN;
    const t0 = performance.now();
    await net.link(1, 'down');
    const probes: Promise<unknown>[] = [];
    const probing = (async () => {
      for (let n = 0; n < 240 && Number.isNaN(writesMs); n++) {
        const c = n % 2 ? s3 : s2;
        const data = Buffer.from(`probe ${n}`).toString('base64');
        probes.push(
          c
            .call('POST', '/v1.41/configs/create', { Name: `probe-${n}`, Data: data })
            .then((r) => {
              if (r.status === 201 && Number.isNaN(writesMs)) writesMs = performance.now() - t0;
            })
            .catch(() => undefined),
        );
        await sleep(500);
      }
    })();
    const rescheduleMs = await until('reschedule after leader loss', t0, 150_000, async () => {
      if (Number.isNaN(downMs)) {
        const n = await within(json<NodeView>(s2, 'GET', `/v1.41/nodes/${cut}`), 2000);
        if (n?.Status.State === 'down') downMs = performance.now() - t0;
      }
      const tasks = await within(tasksOf(s2, id), 2000);
      return tasks !== undefined && running(tasks, undefined, cut) === o.replicas;
    });
    await until('a write', t0, 150_000, async () => !Number.isNaN(writesMs));
    await probing;
    await net.link(1, 'up');
    await within(Promise.all(probes), 5000);
    await within(s2.ok('DELETE', `/v1.41/services/${id}`), 30_000);
    return { writesMs, downMs, rescheduleMs };
  });

/** Runs `run` for each system, `o.repetitions` times, alternating which system goes first. */
async function repeat<F extends object>(
  o: Options,
  scenario: string,
  run: (system: SystemName, o: Options) => Promise<F>,
): Promise<Map<SystemName, F[]>> {
  const results = new Map<SystemName, F[]>(o.systems.map((s) => [s, []]));
  for (let r = 1; r <= o.repetitions; r++) {
    for (const system of r % 2 ? o.systems : [...o.systems].reverse()) {
      const load = (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');
      try {
        const f = await run(system, o);
        results.get(system)?.push(f);
        const rounded = JSON.stringify(f, (_k, v) => (typeof v === 'number' ? Math.round(v * 10) / 10 : v));
        console.log(`${scenario} rep ${r} ${system} (load ${load}): ${rounded}`);
      } catch (err) {
        console.log(`${scenario} rep ${r} ${system} (load ${load}): failed: ${(err as Error).message}`);
      }
    }
  }
  return results;
}

function table<F extends object>(
  o: Options,
  results: Map<SystemName, F[]>,
  rows: Array<[string, keyof F & string, number]>,
): void {
  console.log(`\n| figure (median of ${o.repetitions}; the runs) | ${o.systems.join(' | ')} |`);
  console.log(`|---|${o.systems.map(() => '---|').join('')}`);
  for (const [label, key, digits] of rows) {
    const cells = o.systems.map((s) => {
      const values = (results.get(s) ?? []).map((f) => Number(f[key]));
      return values.length
        ? `${median(values).toFixed(digits)} (${values.map((v) => v.toFixed(digits)).join(', ')})`
        : 'n/a';
    });
    console.log(`| ${label} | ${cells.join(' | ')} |`);
  }
}

async function runAll(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  const n = o.replicas;
  if (o.scenarios.includes('workers')) {
    const results = await repeat(o, 'workers', workersRun);
    table(o, results, [
      ['swarm init (ms)', 'initMs', 0],
      [`converge-${n} (ms)`, 'convergeMs', 0],
      ['converge: last task record created (ms)', 'lastTaskCreatedMs', 0],
      ['converge: first task running (ms)', 'firstRunningMs', 0],
      ['converge: last task running (ms)', 'lastRunningMs', 0],
      [`rolling update of ${n}, parallelism 10 (ms)`, 'updateMs', 0],
      ['worker cut: node down (ms)', 'downMs', 0],
      [`worker cut: ${n} running off it (ms)`, 'rescheduleMs', 0],
      ['RSS idle, 3 hosts (MiB)', 'rssIdleMiB', 1],
      [`RSS with ${n} tasks, 3 hosts (MiB)`, 'rssTasksMiB', 1],
      ['RSS idle, manager (MiB)', 'managerRssIdleMiB', 1],
      [`RSS with ${n} tasks, manager (MiB)`, 'managerRssTasksMiB', 1],
    ]);
  }
  if (o.scenarios.includes('leader')) {
    const results = await repeat(o, 'leader', leaderRun);
    table(o, results, [
      ['leader cut: a survivor accepts a write (ms)', 'writesMs', 0],
      ['leader cut: its node down (ms)', 'downMs', 0],
      [`leader cut: ${n} running off it (ms)`, 'rescheduleMs', 0],
    ]);
  }
}

let stopping = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`${sig}: removing what the benchmark started\n`);
    void Promise.all([...cleanups].map((c) => c().catch(() => undefined))).then(() => process.exit(130));
  });
}

await runAll();
