/**
 * Engine benchmark over the Docker API, for berth and, given its socket, a reference dockerd.
 *
 *   node --import tsx bench/engine/engine.bench.ts [--berth unix:///path] [--reference unix:///path]
 *        [--runtimes crun,runc] [--iterations 30] [--concurrent-total 40] [--list 200] [--logs-mib 64]
 *
 * Without --berth it starts its own berth engine on a temp socket and data root, one per runtime
 * with --runtimes (each with that default runtime, measured side by side). Every loop is
 * bounded in count; the whole run stops by itself. The floor (mount + `crun run` + umount of the
 * same kind of bundle, floor.ts) is timed in the same rounds as the `--network none` cycles, and
 * a bare `crun exec` in the rounds of the exec round trip; neither in an engine's time.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { EngineClient } from './client.js';
import { type Floor, startFloor } from './floor.js';
import { RawEngineClient } from './raw-client.js';
import { median, percentile, timed } from './stats.js';
import { ensureBusybox, startBerth } from './targets.js';

interface Options {
  berth?: string;
  reference?: string;
  runtimes: Array<'runc' | 'crun'>;
  iterations: number;
  concurrentTotal: number;
  list: number;
  logsMiB: number;
}

function parseOptions(argv: string[]): Options {
  const o: Options = { iterations: 30, concurrentTotal: 40, list: 200, logsMiB: 64, runtimes: [] };
  for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1] ?? ''];
    if (k === '--berth') o.berth = v;
    else if (k === '--reference') o.reference = v;
    else if (k === '--runtimes') o.runtimes = v.split(',').map((r) => (r === 'runc' ? 'runc' : 'crun'));
    else if (k === '--iterations') o.iterations = Number(v);
    else if (k === '--concurrent-total') o.concurrentTotal = Number(v);
    else if (k === '--list') o.list = Number(v);
    else if (k === '--logs-mib') o.logsMiB = Number(v);
    else throw new Error(`unknown option ${k}`);
  }
  return o;
}

const socketOf = (host: string): string => host.replace(/^unix:\/\//, '');

async function runCycle(c: EngineClient, cmd: string[], networkMode?: string): Promise<void> {
  const body: Record<string, unknown> = { Image: 'busybox:latest', Cmd: cmd };
  if (networkMode) body.HostConfig = { NetworkMode: networkMode };
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

export interface Figures {
  cycleMedianMs: number;
  cycleP90Ms: number;
  cycleNoneMedianMs: number;
  /** The engine's own CPU (user + system, all its threads, and its berth-sys helper's) per `--network none` cycle; NaN unknown. */
  cpuPerCycleMs: number;
  /** exec create + start of `true` in a running container, attached, to its end. */
  execMedianMs: number;
  concurrentPerSec: number;
  listMedianMs: number;
  inspectMedianMs: number;
  logsMiBps: number;
}

interface Target {
  name: string;
  c: EngineClient;
  /** The list and inspect phases' client (see raw-client.ts). */
  raw: RawEngineClient;
  /** The engine's pid when the benchmark started it (its CPU time is read from /proc). */
  pid?: number;
}

/** A process's own CPU time so far (user + system of all its threads), ms; 0 when it is gone. */
function processCpuMs(pid: number): number {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return 0;
  }
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

/** The engine's helper processes (berth-sys): its children by that name. */
function helperPids(pid: number): number[] {
  const pids: number[] = [];
  let tasks: string[] = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return pids;
  }
  for (const task of tasks) {
    let children = '';
    try {
      children = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8');
    } catch {
      continue;
    }
    for (const child of children.split(' ').filter(Boolean).map(Number)) {
      try {
        if (readFileSync(`/proc/${child}/comm`, 'utf8').trim() === 'berth-sys') pids.push(child);
      } catch {
        // gone
      }
    }
  }
  return pids;
}

/**
 * The engine's CPU time so far, ms: its own (all threads) and its helper's (berth-sys, which makes
 * its mounts, namespaces and spawns: work moved there is still counted). The container monitor and
 * the runtime are not the engine's (dockerd's shims and runc are not counted for it either).
 */
function cpuMs(pid: number): number {
  return processCpuMs(pid) + helperPids(pid).reduce((sum, p) => sum + processCpuMs(p), 0);
}

async function execCycle(c: EngineClient, container: string): Promise<void> {
  const r = await c.ok('POST', `/v1.41/containers/${container}/exec`, {
    Cmd: ['true'],
    AttachStdout: true,
    AttachStderr: true,
  });
  const { Id } = JSON.parse(r.toString()) as { Id: string };
  await c.ok('POST', `/v1.41/exec/${Id}/start`, { Detach: false, Tty: false });
}

/** `fn` for each target in turn, `rounds` times: both engines meet the same client and load. */
async function alternate(
  targets: Target[],
  rounds: number,
  fn: (t: Target, i: number) => Promise<unknown>,
): Promise<void> {
  for (let i = 0; i < rounds; i++) for (const t of targets) await fn(t, i);
}

/**
 * Timings per target, measured in alternation; `afterRound` (untimed: the floor's turn) runs
 * after the last target of each round.
 */
async function timeAlternately(
  targets: Target[],
  rounds: number,
  fn: (t: Target, i: number) => Promise<unknown>,
  afterRound?: () => Promise<unknown>,
): Promise<Map<Target, number[]>> {
  const times = new Map<Target, number[]>(targets.map((t) => [t, []]));
  await alternate(targets, rounds, async (t, i) => {
    times.get(t)?.push((await timed(() => fn(t, i)))[0]);
    if (afterRound && t === targets[targets.length - 1]) await afterRound();
  });
  return times;
}

const INSPECT_WARMUP = 500;
const INSPECT_MEASURED = 1000;
const LIST_WARMUP = 20;
const LIST_MEASURED = 20;
/** Requests sent to one engine before turning to the other, in the list and inspect phases. */
const BATCH = 50;

/**
 * Every phase runs on all targets before the next phase starts; within the request-rate phases
 * the targets take turns (one cycle, or a batch of requests, each), so that neither is measured
 * with a colder client or a different background load than the other.
 */
async function measure(
  targets: Target[],
  o: Options,
  floor: Floor | null,
  floorTimes: number[],
  floorExecTimes: number[],
): Promise<Map<Target, Figures>> {
  const phase = (name: string) => console.error(`${new Date().toISOString().slice(11, 19)} ${name}`);
  for (const t of targets) await ensureBusybox(t.c);
  await alternate(targets, 3, (t) => runCycle(t.c, ['true']));
  phase('run cycles');

  const cycles = await timeAlternately(targets, o.iterations, (t) => runCycle(t.c, ['true']));
  phase('run cycles, --network none, and the floor');
  const cpuBefore = new Map(targets.map((t) => [t, t.pid ? cpuMs(t.pid) : Number.NaN]));
  // the floor takes its turn once per round, after the last engine (not in that engine's time)
  const none = await timeAlternately(
    targets,
    o.iterations,
    (t) => runCycle(t.c, ['true'], 'none'),
    floor ? async () => floorTimes.push(await floor.cycle()) : undefined,
  );
  const cpuPerCycle = new Map(
    targets.map((t) => [t, t.pid ? (cpuMs(t.pid) - (cpuBefore.get(t) ?? 0)) / o.iterations : Number.NaN]),
  );

  phase('exec');
  const sleepers = new Map<Target, string>();
  for (const t of targets) {
    const r = await t.c.ok('POST', '/v1.41/containers/create', {
      Image: 'busybox:latest',
      Cmd: ['sleep', '1000'],
      HostConfig: { NetworkMode: 'none' },
    });
    const id = (JSON.parse(r.toString()) as { Id: string }).Id;
    await t.c.ok('POST', `/v1.41/containers/${id}/start`);
    sleepers.set(t, id);
  }
  await alternate(targets, 3, (t) => execCycle(t.c, sleepers.get(t) ?? ''));
  const execs = await timeAlternately(
    targets,
    o.iterations,
    (t) => execCycle(t.c, sleepers.get(t) ?? ''),
    floor ? async () => floorExecTimes.push(await floor.exec()) : undefined,
  );
  for (const t of targets) await t.c.ok('DELETE', `/v1.41/containers/${sleepers.get(t)}?force=1`);

  phase('4 concurrent clients');
  const concurrent = new Map<Target, number>();
  for (const t of targets) {
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < o.concurrentTotal) {
        next++;
        await runCycle(t.c, ['true']);
      }
    };
    concurrent.set(t, (await timed(() => Promise.all([worker(), worker(), worker(), worker()])))[0]);
  }

  phase('list and inspect');
  const ids = new Map<Target, string[]>(targets.map((t) => [t, []]));
  await alternate(targets, o.list, async (t) => {
    const r = await t.c.ok('POST', '/v1.41/containers/create', { Image: 'busybox:latest', Cmd: ['true'] });
    ids.get(t)?.push((JSON.parse(r.toString()) as { Id: string }).Id);
  });
  const list = (t: Target) => t.raw.get('/v1.41/containers/json?all=1');
  await alternate(targets, LIST_WARMUP, list);
  const lists = await timeAlternately(targets, LIST_MEASURED, list);

  const inspectBatch = async (t: Target, round: number, into?: number[]): Promise<void> => {
    const own = ids.get(t) ?? [];
    for (let i = 0; i < BATCH; i++) {
      const id = own[(round * BATCH + i) % own.length] ?? '';
      const [ms] = await timed(() => t.raw.get(`/v1.41/containers/${id}/json`));
      into?.push(ms);
    }
  };
  await alternate(targets, INSPECT_WARMUP / BATCH, (t, round) => inspectBatch(t, round));
  const inspects = new Map<Target, number[]>(targets.map((t) => [t, []]));
  await alternate(targets, INSPECT_MEASURED / BATCH, (t, round) => inspectBatch(t, round, inspects.get(t)));
  for (const t of targets)
    for (const id of ids.get(t) ?? []) await t.c.ok('DELETE', `/v1.41/containers/${id}?force=1`);

  phase('logs');
  const logs = new Map<Target, number>();
  for (const t of targets) logs.set(t, await logsThroughput(t.c, o.logsMiB));

  return new Map(
    targets.map((t) => {
      const own = (m: Map<Target, number[]>) => m.get(t) ?? [];
      const figures: Figures = {
        cycleMedianMs: median(own(cycles)),
        cycleP90Ms: percentile(own(cycles), 90),
        cycleNoneMedianMs: median(own(none)),
        cpuPerCycleMs: cpuPerCycle.get(t) ?? Number.NaN,
        execMedianMs: median(own(execs)),
        concurrentPerSec: (o.concurrentTotal / (concurrent.get(t) ?? Number.NaN)) * 1000,
        listMedianMs: median(own(lists)),
        inspectMedianMs: median(own(inspects)),
        logsMiBps: logs.get(t) ?? Number.NaN,
      };
      return [t, figures];
    }),
  );
}

/** A container writes `mib` MiB of 64-byte lines; its whole log is then read once (MiB/s). */
async function logsThroughput(c: EngineClient, mib: number): Promise<number> {
  const bytes = mib * 1024 * 1024;
  const create = await c.ok('POST', '/v1.41/containers/create', {
    Image: 'busybox:latest',
    Cmd: ['sh', '-c', `yes 0123456789012345678901234567890123456789012345678901234567890 | head -c ${bytes}`],
    HostConfig: { LogConfig: { Type: 'json-file', Config: {} } },
  });
  const logId = (JSON.parse(create.toString()) as { Id: string }).Id;
  await c.ok('POST', `/v1.41/containers/${logId}/start`);
  await c.ok('POST', `/v1.41/containers/${logId}/wait`);
  let received = 0;
  const [logMs] = await timed(() =>
    c.call('GET', `/v1.41/containers/${logId}/logs?stdout=1&stderr=1`, undefined, (d) => {
      received += d.length;
    }),
  );
  await c.ok('DELETE', `/v1.41/containers/${logId}?force=1`);
  if (received < bytes) throw new Error(`logs returned ${received} bytes, expected at least ${bytes}`);
  return mib / (logMs / 1000);
}

function printTable(results: Array<[string, Figures]>, floorMs: number[], floorExecMs: number[]): void {
  const fixed = (v: number, d: number) => (Number.isNaN(v) ? 'n/a' : v.toFixed(d));
  const rows: Array<[string, (f: Figures) => string, string?]> = [
    ['run cycle of `true`, median (ms)', (f) => f.cycleMedianMs.toFixed(1)],
    ['run cycle of `true`, p90 (ms)', (f) => f.cycleP90Ms.toFixed(1)],
    [
      'run cycle, --network none, median (ms)',
      (f) => f.cycleNoneMedianMs.toFixed(1),
      floorMs.length > 0 ? median(floorMs).toFixed(1) : 'n/a',
    ],
    ['engine CPU per --network none cycle (ms, with berth-sys)', (f) => fixed(f.cpuPerCycleMs, 1)],
    [
      'exec round trip of `true`, median (ms)',
      (f) => f.execMedianMs.toFixed(1),
      floorExecMs.length > 0 ? median(floorExecMs).toFixed(1) : 'n/a',
    ],
    ['4 concurrent clients (containers/s)', (f) => f.concurrentPerSec.toFixed(2)],
    ['list 200 containers, median (ms)', (f) => f.listMedianMs.toFixed(2)],
    ['inspect, median (ms)', (f) => f.inspectMedianMs.toFixed(3)],
    ['logs read throughput (MiB/s)', (f) => f.logsMiBps.toFixed(1)],
  ];
  const header = ['figure', ...results.map(([n]) => n), 'floor (mount + crun run + umount; crun exec)'];
  const body = rows.map(([label, fmt, floor]) => [label, ...results.map(([, f]) => fmt(f)), floor ?? '']);
  const widths = header.map((_, i) => Math.max(...[header, ...body].map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i] ?? 0)).join(' | ')} |`;
  console.log(line(header));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const r of body) console.log(line(r));
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  const own: Array<{ name: string; host: string; pid: number | undefined; stop(): Promise<void> }> = [];
  if (!o.berth) {
    for (const rt of o.runtimes.length > 0 ? o.runtimes : [undefined]) {
      own.push({ name: rt ? `berth (${rt})` : 'berth', ...(await startBerth(rt)) });
    }
  }
  const target = async (name: string, host: string, pid?: number): Promise<Target> => ({
    name,
    c: new EngineClient(socketOf(host)),
    raw: await RawEngineClient.open(socketOf(host)),
    ...(pid ? { pid } : {}),
  });
  const targets: Target[] = o.berth
    ? [await target('berth', o.berth)]
    : await Promise.all(own.map((e) => target(e.name, e.host, e.pid)));
  if (o.reference) targets.push(await target('dockerd (reference)', o.reference));
  const floor = await startFloor().catch((err: unknown) => {
    console.error(`no floor column: ${err instanceof Error ? err.message : String(err)}`);
    return null;
  });
  try {
    console.error(`measuring ${targets.map((t) => t.name).join(' and ')}...`);
    const floorTimes: number[] = [];
    const floorExecTimes: number[] = [];
    const figures = await measure(targets, o, floor, floorTimes, floorExecTimes);
    printTable(
      targets.map((t) => [t.name, figures.get(t) as Figures]),
      floorTimes,
      floorExecTimes,
    );
  } finally {
    await floor?.close();
    for (const t of targets) {
      t.c.close();
      t.raw.close();
    }
    for (const e of own) await e.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
