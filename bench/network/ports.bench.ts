/**
 * Network benchmark: the run cycle (create, start, wait, remove) of `true` with `--network none`,
 * on the default bridge, and with one published port, for berth and, given its socket, a
 * reference dockerd, measured in the same run, taking turns (each iteration runs every figure on
 * every engine). The default bridge against `--network none` is what network set-up adds to a
 * cycle. With the engine's pid (its own engine, or `--berth-pid`), the CPU time berth and the
 * tools it runs (CNI plugins, iptables-restore, mount: the children it reaps) spend per cycle.
 *
 *   node --import tsx bench/network/ports.bench.ts [--berth unix:///path [--berth-pid N]]
 *        [--reference unix:///path] [--iterations 30]
 *
 * The port is `127.0.0.1::80/tcp` (an ephemeral host port: no fixed port on a shared machine) and,
 * in a second figure, `::80/tcp` (0.0.0.0 and ::, two bindings). After each publishing cycle the
 * published port is checked to be free again (released at removal). Bounded loops only.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { EngineClient } from '../engine/client.js';
import { median, percentile, timed } from '../engine/stats.js';
import { ensureBusybox, startBerth } from '../engine/targets.js';

interface Options {
  berth?: string;
  berthPid?: number;
  reference?: string;
  iterations: number;
}

function parseOptions(argv: string[]): Options {
  const o: Options = { iterations: 30 };
  for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1] ?? ''];
    if (k === '--berth') o.berth = v;
    else if (k === '--berth-pid') o.berthPid = Number(v);
    else if (k === '--reference') o.reference = v;
    else if (k === '--iterations') o.iterations = Number(v);
    else throw new Error(`unknown option ${k}`);
  }
  return o;
}

interface Target {
  name: string;
  c: EngineClient;
}

type Binding = { HostIp: string; HostPort: string } | undefined;

/** A cycle's network: none, the default bridge, the bridge with a published port, or a user network with one. */
type Mode = 'none' | Binding | { network: string; binding: Binding };

/** The user-defined network of the user-network figure, made afresh on each engine. */
const USER_NETWORK = 'berth-bench-ports';

/** CPU time (ms) of a process and the children it reaped (utime, stime, cutime, cstime). */
function cpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields from the state (field 3): utime is field 14
    const ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i] ?? 0), 0);
    return (ticks * 1000) / 100;
  } catch {
    return Number.NaN;
  }
}

function canBind(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen({ host, port }, () => s.close(() => resolve(true)));
  });
}

/** One cycle, with the binding when given (`none`: --network none). */
async function runCycle(c: EngineClient, mode: Mode): Promise<void> {
  const body: Record<string, unknown> = { Image: 'busybox:latest', Cmd: ['true'] };
  if (mode === 'none') body.HostConfig = { NetworkMode: 'none' };
  else if (mode && 'network' in mode) {
    body.ExposedPorts = { '80/tcp': {} };
    body.HostConfig = { NetworkMode: mode.network, PortBindings: { '80/tcp': [mode.binding] } };
  } else if (mode) {
    body.ExposedPorts = { '80/tcp': {} };
    body.HostConfig = { PortBindings: { '80/tcp': [mode] } };
  }
  const { Id } = JSON.parse((await c.ok('POST', '/v1.41/containers/create', body)).toString()) as {
    Id: string;
  };
  await c.ok('POST', `/v1.41/containers/${Id}/start`);
  const wait = JSON.parse((await c.ok('POST', `/v1.41/containers/${Id}/wait`)).toString()) as {
    StatusCode: number;
  };
  if (wait.StatusCode !== 0) throw new Error(`container exited ${wait.StatusCode}`);
  await c.ok('DELETE', `/v1.41/containers/${Id}?force=1`);
}

/** Start a container with the binding, read the port it got, check it is held, remove, check it is free. */
async function checkRelease(c: EngineClient, binding: Binding): Promise<void> {
  const { Id } = JSON.parse(
    (
      await c.ok('POST', '/v1.41/containers/create', {
        Image: 'busybox:latest',
        Cmd: ['sleep', '30'],
        // as the docker CLI sends -p: the port exposed too
        ExposedPorts: { '80/tcp': {} },
        HostConfig: { PortBindings: { '80/tcp': [binding] } },
      })
    ).toString(),
  ) as { Id: string };
  await c.ok('POST', `/v1.41/containers/${Id}/start`);
  const info = JSON.parse((await c.ok('GET', `/v1.41/containers/${Id}/json`)).toString()) as {
    NetworkSettings: { Ports: Record<string, Array<{ HostIp: string; HostPort: string }>> };
  };
  const got = info.NetworkSettings.Ports['80/tcp']?.[0];
  if (!got) console.error(JSON.stringify(info.NetworkSettings));
  const port = Number(got?.HostPort);
  const ip = got?.HostIp === '0.0.0.0' || !got?.HostIp ? '127.0.0.1' : got.HostIp;
  if (!port || (await canBind(ip, port))) throw new Error(`the published port ${ip}:${port} is not held`);
  await c.ok('DELETE', `/v1.41/containers/${Id}?force=1`);
  for (let i = 0; i < 50 && !(await canBind(ip, port)); i++) await new Promise((r) => setTimeout(r, 20));
  if (!(await canBind(ip, port)))
    throw new Error(`the published port ${ip}:${port} is still held after removal`);
}

const LOOPBACK: Binding = { HostIp: '127.0.0.1', HostPort: '' };
const ALL: Binding = { HostIp: '', HostPort: '' };

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  const own = o.berth ? undefined : await startBerth();
  const socketOf = (host: string) => host.replace(/^unix:\/\//, '');
  const targets: Target[] = [{ name: 'berth', c: new EngineClient(socketOf(o.berth ?? own?.host ?? '')) }];
  if (o.reference) targets.push({ name: 'dockerd (reference)', c: new EngineClient(socketOf(o.reference)) });
  const phases: Array<[string, Mode]> = [
    ['run cycle, --network none', 'none'],
    ['run cycle, default bridge, no port', undefined],
    ['run cycle, -p 127.0.0.1::80', LOOPBACK],
    ['run cycle, -p ::80 (0.0.0.0 and ::)', ALL],
    ['run cycle, user network, -p 127.0.0.1::80', { network: USER_NETWORK, binding: LOOPBACK }],
  ];
  const times = new Map<string, number[]>();
  const cpu = new Map<string, number[]>();
  const berthPid = o.berthPid ?? own?.pid;
  try {
    console.error(`measuring ${targets.map((t) => t.name).join(' and ')}...`);
    for (const t of targets) {
      await ensureBusybox(t.c);
      await t.c.call('DELETE', `/v1.41/networks/${USER_NETWORK}`);
      await t.c.ok('POST', '/v1.41/networks/create', { Name: USER_NETWORK, Driver: 'bridge' });
      await checkRelease(t.c, LOOPBACK);
      await checkRelease(t.c, ALL);
      for (let i = 0; i < 3; i++) await runCycle(t.c, LOOPBACK);
    }
    // phases and engines take turns within each iteration: a change of the machine's load meets all
    for (let i = 0; i < o.iterations; i++) {
      for (const [label, binding] of phases) {
        for (const t of targets) {
          const pid = t.name === 'berth' ? berthPid : undefined;
          const cpu0 = pid ? cpuMs(pid) : Number.NaN;
          const [ms] = await timed(() => runCycle(t.c, binding));
          const key = `${label}|${t.name}`;
          times.set(key, [...(times.get(key) ?? []), ms]);
          if (pid) cpu.set(label, [...(cpu.get(label) ?? []), cpuMs(pid) - cpu0]);
        }
      }
    }
    const header = [
      'figure (ms)',
      ...targets.map((t) => `${t.name} median`),
      ...targets.map((t) => `${t.name} p90`),
    ];
    const rows = phases.map(([label]) => [
      label,
      ...targets.map((t) => median(times.get(`${label}|${t.name}`) ?? []).toFixed(1)),
      ...targets.map((t) => percentile(times.get(`${label}|${t.name}`) ?? [], 90).toFixed(1)),
    ]);
    const widths = header.map((_, i) => Math.max(...[header, ...rows].map((r) => (r[i] ?? '').length)));
    const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i] ?? 0)).join(' | ')} |`;
    console.log(line(header));
    console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
    for (const r of rows) console.log(line(r));
    if (cpu.size) {
      console.log('');
      console.log(
        'berth CPU per cycle (engine and the tools it reaps; runc and conmon not counted), mean ms:',
      );
      for (const [label] of phases) {
        const v = cpu.get(label) ?? [];
        console.log(`  ${label}: ${(v.reduce((a, b) => a + b, 0) / Math.max(1, v.length)).toFixed(1)}`);
      }
    }
    const none = (name: string) => median(times.get(`run cycle, --network none|${name}`) ?? []);
    const bridge = (name: string) => median(times.get(`run cycle, default bridge, no port|${name}`) ?? []);
    console.log('');
    for (const t of targets) {
      console.log(
        `${t.name}: the default bridge adds ${(bridge(t.name) - none(t.name)).toFixed(1)} ms to the cycle (medians)`,
      );
    }
  } finally {
    for (const t of targets) {
      await t.c.call('DELETE', `/v1.41/networks/${USER_NETWORK}`).catch(() => undefined);
      t.c.close();
    }
    await own?.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
