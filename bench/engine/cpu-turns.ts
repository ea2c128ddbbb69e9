/**
 * The engine's own CPU per `--network none` cycle, variants measured in turns (issue 13's CPU
 * figure, for comparing builds or node flags in the same minutes; engine.bench.ts prints the
 * figure beside dockerd, this resolves differences of a millisecond or two between variants).
 *
 *   node --import tsx bench/engine/cpu-turns.ts [--rounds 12] [--cycles 10] [--pause-ms 0]
 *        [--bridge default|none] [--network none|default] [--prewarm NAME:CYCLES]
 *        --variant NAME=DISTDIR[,node-flag...] [--variant ...]
 *
 * Each variant is an engine started from a build (`DISTDIR`: a dist/ tree, e.g. a copy of the
 * build before a change, kept as <dir>/dist so that it finds its dist/native helpers) with node
 * flags of its own, on temp roots, with crun. After 10 warm-up cycles each (and `--prewarm`'s
 * more for the variant it names, alone), `--rounds` rounds: in each, every variant runs
 * `--cycles` cycles of create + start + wait + remove of `true` with `--network none` (or
 * `--network default`: the default bridge), one cycle at a time taking turns with the other
 * variants, each cycle followed by `--pause-ms` of idleness (the benchmark's other engines'
 * turns); the CPU of all the engine's threads and of its berth-sys helper over the round
 * (`/proc/<pid>/task/<tid>/schedstat`, ns), per cycle, and the event loop's thread alone. Prints
 * per-round figures and the medians.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { removeBridgeFromHost } from '../../src/engine/network/host-cleanup.js';
import { EngineClient } from './client.js';
import { median } from './stats.js';
import { ensureBusybox } from './targets.js';

interface Variant {
  name: string;
  dist: string;
  nodeFlags: string[];
}

interface Running {
  v: Variant;
  dir: string;
  bridge: string;
  child: ChildProcess;
  c: EngineClient;
  perRound: number[];
  mainPerRound: number[];
}

function parse(argv: string[]) {
  const o = {
    rounds: 12,
    cycles: 10,
    pauseMs: 0,
    bridge: 'default',
    network: 'none',
    variants: [] as Variant[],
    prewarm: new Map<string, number>(),
  };
  for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1] ?? ''];
    if (k === '--rounds') o.rounds = Number(v);
    else if (k === '--cycles') o.cycles = Number(v);
    else if (k === '--pause-ms') o.pauseMs = Number(v);
    else if (k === '--bridge') o.bridge = v;
    else if (k === '--network') o.network = v;
    else if (k === '--prewarm')
      o.prewarm.set(v.slice(0, v.lastIndexOf(':')), Number(v.slice(v.lastIndexOf(':') + 1)));
    else if (k === '--variant') {
      const eq = v.indexOf('=');
      const [dist, ...nodeFlags] = v.slice(eq + 1).split(',');
      o.variants.push({ name: v.slice(0, eq), dist: resolve(dist ?? 'dist'), nodeFlags });
    } else throw new Error(`unknown option ${k}`);
  }
  if (o.variants.length === 0) throw new Error('give at least one --variant NAME=DISTDIR[,flags]');
  return o;
}

function taskNs(pid: number): number {
  let sum = 0;
  let tasks: string[] = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return 0;
  }
  for (const t of tasks) {
    try {
      sum += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // gone
    }
  }
  return sum;
}

/** The engine's main thread (the event loop), ns. */
function mainNs(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return 0;
  }
}

/** The engine's threads and its berth-sys helper's, ns. */
function cpuNs(pid: number): number {
  let sum = taskNs(pid);
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    let children = '';
    try {
      children = readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8');
    } catch {
      continue;
    }
    for (const child of children.split(' ').filter(Boolean).map(Number)) {
      try {
        if (readFileSync(`/proc/${child}/comm`, 'utf8').trim() === 'berth-sys') sum += taskNs(child);
      } catch {
        // gone
      }
    }
  }
  return sum;
}

async function start(v: Variant, bridgeMode: string): Promise<Running> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-cpu-'));
  const bridge = bridgeMode === 'none' ? 'none' : `bt${randomBytes(4).toString('hex')}`;
  const suffix = randomBytes(4).toString('hex');
  const socket = join(dir, 'berth.sock');
  const child = spawn(
    process.execPath,
    [
      ...v.nodeFlags,
      join(v.dist, 'cli/main.js'),
      'engine',
      ...['--host', `unix://${socket}`, '--data-root', join(dir, 'data'), '--exec-root', join(dir, 'exec')],
      ...['--log-level', 'warn', '--runtime', 'crun', '--bridge', bridge],
      ...['--swarm-gateway-bridge', `gw${suffix}`, '--swarm-ingress-link', `ig${suffix}`],
    ],
    { stdio: ['ignore', 'inherit', 'inherit'] },
  );
  const c = new EngineClient(socket);
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`${v.name}: engine exited ${child.exitCode}`);
    const up = await c.call('GET', '/_ping').catch(() => undefined);
    if (up?.status === 200) break;
    await sleep(100);
  }
  await ensureBusybox(c);
  return { v, dir, bridge, child, c, perRound: [], mainPerRound: [] };
}

async function cycle(c: EngineClient, network = 'none'): Promise<void> {
  const body = { Image: 'busybox:latest', Cmd: ['true'], HostConfig: { NetworkMode: network } };
  const { Id } = JSON.parse((await c.ok('POST', '/v1.41/containers/create', body)).toString()) as {
    Id: string;
  };
  await c.ok('POST', `/v1.41/containers/${Id}/start`);
  await c.ok('POST', `/v1.41/containers/${Id}/wait`);
  await c.ok('DELETE', `/v1.41/containers/${Id}?force=1`);
}

async function stop(r: Running): Promise<void> {
  if (r.child.exitCode === null) {
    const exited = new Promise<void>((ok) => r.child.once('exit', () => ok()));
    r.child.kill('SIGTERM');
    const t = setTimeout(() => r.child.kill('SIGKILL'), 20_000);
    await exited;
    clearTimeout(t);
  }
  await rm(r.dir, { recursive: true, force: true });
  if (r.bridge !== 'none') await removeBridgeFromHost(r.bridge);
}

async function main(): Promise<void> {
  const o = parse(process.argv.slice(2));
  const running: Running[] = [];
  try {
    for (const v of o.variants) running.push(await start(v, o.bridge));
    for (let i = 0; i < 10; i++) for (const r of running) await cycle(r.c);
    for (const r of running) for (let i = 0; i < (o.prewarm.get(r.v.name) ?? 0); i++) await cycle(r.c);
    for (let round = 0; round < o.rounds; round++) {
      const before = running.map((r) => cpuNs(r.child.pid ?? 0));
      const mainBefore = running.map((r) => mainNs(r.child.pid ?? 0));
      for (let i = 0; i < o.cycles; i++) {
        for (const r of running) {
          await cycle(r.c, o.network);
          if (o.pauseMs) await sleep(o.pauseMs);
        }
      }
      const line = running.map((r, k) => {
        const ms = (cpuNs(r.child.pid ?? 0) - (before[k] ?? 0)) / 1e6 / o.cycles;
        const main = (mainNs(r.child.pid ?? 0) - (mainBefore[k] ?? 0)) / 1e6 / o.cycles;
        r.perRound.push(ms);
        r.mainPerRound.push(main);
        return `${r.v.name} ${ms.toFixed(2)} (loop ${main.toFixed(2)})`;
      });
      console.log(
        `round ${round + 1}: ${line.join('  ')}  (load ${readFileSync('/proc/loadavg', 'utf8').split(' ')[0]})`,
      );
    }
    for (const r of running) {
      const s = [...r.perRound].sort((a, b) => a - b);
      console.log(
        `${r.v.name}: median ${median(s).toFixed(2)} ms per cycle (event loop ${median(r.mainPerRound).toFixed(2)}), min ${s[0]?.toFixed(2)}, max ${s.at(-1)?.toFixed(2)}`,
      );
    }
  } finally {
    for (const r of running) await stop(r).catch((e) => console.error(`stopping ${r.v.name}: ${e}`));
  }
}

await main();
