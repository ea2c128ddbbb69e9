/**
 * Swarm benchmark (issue 14): berth (1 manager + 2 workers) beside Debian's dockerd 20.10 run the
 * same way, each host a network namespace on one switch bridge (test/helpers/swarm-netns.ts).
 *
 *   node --import tsx bench/swarm/swarm.bench.ts [--repetitions 3] [--replicas 30] [--systems berth,dockerd]
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
  replicas: number;
  systems: SystemName[];
}

function parseOptions(argv: string[]): Options {
  const o: Options = { repetitions: 3, replicas: 30, systems: ['berth', 'dockerd'] };
  for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1] ?? ''];
    if (k === '--repetitions') o.repetitions = Number(v);
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
  NodeID?: string;
  DesiredState: string;
  Status: { State: string };
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

async function oneRun(system: SystemName, o: Options): Promise<Figures> {
  const net = await TestNetwork.create(3, '192.168.213');
  const hosts: Host[] = [];
  const cleanup = async (): Promise<void> => {
    await net.link(3, 'up').catch(() => undefined);
    await Promise.all(hosts.slice(1).map((h) => h.destroy().catch(() => undefined)));
    await hosts[0]?.destroy().catch(() => undefined);
    await net.destroy();
  };
  cleanups.add(cleanup);
  const clients: EngineClient[] = [];
  try {
    for (let i = 1; i <= 3; i++) hosts.push(await startHost(system, net.hosts[i - 1] ?? '', `host${i}`));
    for (const h of hosts) clients.push(new EngineClient(h.socket));
    const [m, ...workers] = clients as [EngineClient, EngineClient, EngineClient];
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

    // swarm init, heartbeat 1 s
    let t0 = performance.now();
    await m.ok('POST', '/v1.41/swarm/init', {
      ListenAddr: `${net.address(1)}:2377`,
      AdvertiseAddr: net.address(1),
      Spec: { Dispatcher: { HeartbeatPeriod: 1 * NS } },
    });
    const initMs = performance.now() - t0;
    const swarm = await json<{ JoinTokens: { Worker: string } }>(m, 'GET', '/v1.41/swarm');
    for (const [i, w] of workers.entries()) {
      await w.ok('POST', '/v1.41/swarm/join', {
        ListenAddr: `${net.address(i + 2)}:2377`,
        AdvertiseAddr: net.address(i + 2),
        RemoteAddrs: [`${net.address(1)}:2377`],
        JoinToken: swarm.JoinTokens.Worker,
      });
    }
    await until('3 nodes ready', performance.now(), 30_000, async () => {
      const nodes = await json<NodeView[]>(m, 'GET', '/v1.41/nodes');
      return nodes.filter((n) => n.Status.State === 'ready').length === 3;
    });
    await sleep(2000);
    const rssIdleMiB = await rssMiB(hosts);
    const managerRssIdleMiB = await rssMiB(hosts.slice(0, 1));

    // converge
    const spec = {
      Name: 'bench',
      TaskTemplate: {
        ContainerSpec: { Image: 'busybox:latest', Command: ['sleep', '86400'], Env: ['V=0'] },
        RestartPolicy: { Condition: 'any', Delay: 0 },
      },
      Mode: { Replicated: { Replicas: o.replicas } },
      UpdateConfig: { Parallelism: 10, Delay: 0, FailureAction: 'pause', Order: 'stop-first' },
    };
    t0 = performance.now();
    const { ID: id } = await json<{ ID: string }>(m, 'POST', '/v1.41/services/create', spec);
    const convergeMs = await until(
      'converge',
      t0,
      180_000,
      async () => running(await tasksOf(m, id)) === o.replicas,
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

    // tidy: the service's containers go before the engines stop
    await m.ok('DELETE', `/v1.41/services/${id}`);
    await until('containers removed', performance.now(), 90_000, async () => {
      for (const c of clients) {
        const list = await json<unknown[]>(c, 'GET', '/v1.41/containers/json?all=1');
        if (list.length > 0) return false;
      }
      return true;
    }).catch((err: Error) => process.stderr.write(`${system}: ${err.message}\n`));
    for (const c of [...workers, m])
      await c.call('POST', '/v1.41/swarm/leave?force=1').catch(() => undefined);
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
    };
  } finally {
    for (const c of clients) c.close();
    await cleanup();
    cleanups.delete(cleanup);
  }
}

async function runAll(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  const results = new Map<SystemName, Figures[]>(o.systems.map((s) => [s, []]));
  for (let r = 1; r <= o.repetitions; r++) {
    for (const system of r % 2 ? o.systems : [...o.systems].reverse()) {
      const load = (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ');
      try {
        const f = await oneRun(system, o);
        results.get(system)?.push(f);
        console.log(
          `rep ${r} ${system} (load ${load}): ${JSON.stringify(f, (_k, v) => (typeof v === 'number' ? Math.round(v * 10) / 10 : v))}`,
        );
      } catch (err) {
        console.log(`rep ${r} ${system} (load ${load}): failed: ${(err as Error).message}`);
      }
    }
  }
  const rows: Array<[string, keyof Figures, number]> = [
    ['swarm init (ms)', 'initMs', 0],
    [`converge-${o.replicas} (ms)`, 'convergeMs', 0],
    [`rolling update of ${o.replicas}, parallelism 10 (ms)`, 'updateMs', 0],
    ['worker cut: node down (ms)', 'downMs', 0],
    [`worker cut: ${o.replicas} running off it (ms)`, 'rescheduleMs', 0],
    ['RSS idle, 3 hosts (MiB)', 'rssIdleMiB', 1],
    [`RSS with ${o.replicas} tasks, 3 hosts (MiB)`, 'rssTasksMiB', 1],
    ['RSS idle, manager (MiB)', 'managerRssIdleMiB', 1],
    [`RSS with ${o.replicas} tasks, manager (MiB)`, 'managerRssTasksMiB', 1],
  ];
  console.log(`\n| figure (median of ${o.repetitions}) | ${o.systems.join(' | ')} |`);
  console.log(`|---|${o.systems.map(() => '---|').join('')}`);
  for (const [label, key, digits] of rows) {
    const cells = o.systems.map((s) => {
      const values = (results.get(s) ?? []).map((f) => f[key]);
      return values.length
        ? `${median(values).toFixed(digits)} (${values.map((v) => v.toFixed(digits)).join(', ')})`
        : 'n/a';
    });
    console.log(`| ${label} | ${cells.join(' | ')} |`);
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
