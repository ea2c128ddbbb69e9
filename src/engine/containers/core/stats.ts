import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { sortedMap } from '../../../common/sorted-map.js';
import { rfc3339Nano } from '../../../common/time.js';
import type { BlkioEntry, ContainerStats, ResourceDriver } from '../../runtime/runtime.types.js';
import type { Container } from './container.js';
import { ZERO_TIME } from './record.types.js';

/** How often a stream samples, as dockerd's stats collector. */
const INTERVAL_MS = 1000;

export interface StatsOptions {
  /** Keep sending a sample a second until the container stops or the client leaves. */
  stream: boolean;
  /** Without stream: answer the first sample at once (no previous CPU figures); API 1.41. */
  oneShot: boolean;
  signal?: AbortSignal;
}

/** A blkio counter as the stats answer shows it. */
export interface BlkioStatView {
  major: number;
  minor: number;
  op: string;
  value: number;
}

export interface CpuStatsView {
  cpu_usage: {
    total_usage: number;
    percpu_usage?: number[];
    usage_in_kernelmode: number;
    usage_in_usermode: number;
  };
  system_cpu_usage?: number;
  online_cpus?: number;
  throttling_data: { periods: number; throttled_periods: number; throttled_time: number };
}

export interface MemoryStatsView {
  usage?: number;
  max_usage?: number;
  stats?: Record<string, number>;
  failcnt?: number;
  limit?: number;
}

export type NetworkStatsView = Record<
  | 'rx_bytes'
  | 'rx_packets'
  | 'rx_errors'
  | 'rx_dropped'
  | 'tx_bytes'
  | 'tx_packets'
  | 'tx_errors'
  | 'tx_dropped',
  number
>;

/** One object of GET /containers/{id}/stats (dockerd 20.10's types.StatsJSON, cgroup v1). */
export interface StatsView {
  read: string;
  preread: string;
  pids_stats: { current?: number; limit?: number };
  blkio_stats: Record<
    | 'io_service_bytes_recursive'
    | 'io_serviced_recursive'
    | 'io_queue_recursive'
    | 'io_service_time_recursive'
    | 'io_wait_time_recursive'
    | 'io_merged_recursive'
    | 'io_time_recursive'
    | 'sectors_recursive',
    BlkioStatView[] | null
  >;
  num_procs: number;
  storage_stats: Record<string, never>;
  cpu_stats: CpuStatsView;
  precpu_stats: CpuStatsView;
  memory_stats: MemoryStatsView;
  name: string;
  id: string;
  /** API 1.52+. */
  os_type?: 'linux';
  networks?: Record<string, NetworkStatsView>;
}

interface Sample {
  stats: ContainerStats;
  /** `read` as sent (formatted once: the next object's `preread` is the same text). */
  readText: string;
  networks?: Record<string, NetworkStatsView>;
}

/** A container's interfaces but loopback, from /proc/<pid>/net/dev (its network namespace). */
export async function interfaceCounters(pid: number): Promise<Record<string, NetworkStatsView>> {
  const text = await readFile(`/proc/${pid}/net/dev`, 'utf8');
  const out: Record<string, NetworkStatsView> = {};
  for (const line of text.split('\n').slice(2)) {
    const m = /^\s*([^:\s]+):\s*(.*)$/.exec(line);
    if (!m || m[1] === 'lo') continue;
    const f = (m[2] ?? '').trim().split(/\s+/).map(Number);
    out[m[1] as string] = {
      rx_bytes: f[0] ?? 0,
      rx_packets: f[1] ?? 0,
      rx_errors: f[2] ?? 0,
      rx_dropped: f[3] ?? 0,
      tx_bytes: f[8] ?? 0,
      tx_packets: f[9] ?? 0,
      tx_errors: f[10] ?? 0,
      tx_dropped: f[11] ?? 0,
    };
  }
  return out;
}

async function sample(runtime: ResourceDriver, c: Container): Promise<Sample | null> {
  if (!c.isRunningProcess) return null;
  const stats = await runtime.stats(c.id).catch(() => null);
  if (!stats) return null;
  const out: Sample = { stats, readText: rfc3339Nano(stats.read) };
  // dockerd reports the interfaces of the container's own sandbox (none for host, none mode...)
  if (c.record.Endpoint && c.state.Pid > 0) {
    out.networks = await interfaceCounters(c.state.Pid).catch(() => undefined);
  }
  return out;
}

function blkioList(entries: BlkioEntry[] | null): BlkioStatView[] | null {
  return entries ? entries.map((e) => ({ major: e.major, minor: e.minor, op: e.op, value: e.value })) : null;
}

function cpuView(s: ContainerStats | undefined): CpuStatsView {
  if (!s) {
    return {
      cpu_usage: { total_usage: 0, usage_in_kernelmode: 0, usage_in_usermode: 0 },
      throttling_data: { periods: 0, throttled_periods: 0, throttled_time: 0 },
    };
  }
  const cpu = s.cpu;
  return {
    cpu_usage: {
      total_usage: cpu.totalUsage,
      percpu_usage: cpu.percpuUsage,
      usage_in_kernelmode: cpu.usageInKernelmode,
      usage_in_usermode: cpu.usageInUsermode,
    },
    system_cpu_usage: cpu.systemUsage,
    online_cpus: cpu.onlineCpus,
    throttling_data: {
      periods: cpu.throttling.periods,
      throttled_periods: cpu.throttling.throttledPeriods,
      throttled_time: cpu.throttling.throttledTime,
    },
  };
}

/** One stats object, keys in dockerd 20.10's order; without a sample, dockerd's zeroed one. */
export function statsView(c: Container, cur: Sample | null, prev: Sample | null): StatsView {
  const s = cur?.stats;
  const out: StatsView = {
    read: cur ? cur.readText : ZERO_TIME,
    preread: prev ? prev.readText : ZERO_TIME,
    pids_stats: s ? { current: s.pids.current, ...(s.pids.limit ? { limit: s.pids.limit } : {}) } : {},
    blkio_stats: {
      io_service_bytes_recursive: blkioList(s ? s.blkio.ioServiceBytesRecursive : null),
      io_serviced_recursive: blkioList(s ? s.blkio.ioServicedRecursive : null),
      io_queue_recursive: s ? [] : null,
      io_service_time_recursive: s ? [] : null,
      io_wait_time_recursive: s ? [] : null,
      io_merged_recursive: s ? [] : null,
      io_time_recursive: s ? [] : null,
      sectors_recursive: s ? [] : null,
    },
    num_procs: 0,
    storage_stats: {},
    cpu_stats: cpuView(s),
    precpu_stats: cpuView(prev?.stats),
    memory_stats: s
      ? {
          usage: s.memory.usage,
          max_usage: s.memory.maxUsage,
          stats: sortedMap(s.memory.stats),
          ...(s.memory.failcnt ? { failcnt: s.memory.failcnt } : {}),
          limit: s.memory.limit,
        }
      : {},
    name: c.name,
    id: c.id,
    os_type: 'linux',
  };
  if (cur?.networks && Object.keys(cur.networks).length) out.networks = cur.networks;
  return out;
}

/**
 * GET /containers/{id}/stats as dockerd answers it: a stopped container gets one zeroed object
 * without `stream` (and nothing while it does not run with it); a one-shot answers the first
 * sample; otherwise two samples a second apart, so that the CPU share can be worked out; a stream
 * goes on every second, each object carrying the previous one's CPU figures, until the container
 * stops or the client leaves.
 */
export async function* containerStats(
  runtime: ResourceDriver,
  c: Container,
  o: StatsOptions,
): AsyncGenerator<StatsView> {
  const wait = async (): Promise<boolean> => {
    try {
      await sleep(INTERVAL_MS, undefined, o.signal ? { signal: o.signal } : undefined);
      return true;
    } catch {
      return false;
    }
  };
  if (!c.isRunningProcess && !o.stream) {
    yield statsView(c, null, null);
    return;
  }
  let prev: Sample | null = null;
  if (!o.stream && !o.oneShot) {
    prev = await sample(runtime, c);
    if (prev && !(await wait())) return;
  }
  for (;;) {
    const cur = await sample(runtime, c);
    if (!cur) {
      if (!o.stream) yield statsView(c, null, null);
      return;
    }
    yield statsView(c, cur, prev);
    if (!o.stream) return;
    prev = cur;
    if (!(await wait())) return;
  }
}
