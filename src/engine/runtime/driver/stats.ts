import { readdir, readFile } from 'node:fs/promises';
import { totalmem } from 'node:os';
import { join } from 'node:path';
import { errnoCode } from '../../../common/errors.js';
import type { BlkioEntry, ContainerStats } from '../runtime.types.js';

const clockTicks = 100;
const nsPerTick = 1e9 / clockTicks;

async function read(path: string): Promise<string | null> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EINVAL' || code === 'ENODEV') return null;
    throw err;
  }
}

const num = (s: string | null | undefined): number => {
  if (!s) return 0;
  const t = s.trim();
  if (t === 'max') return Number.MAX_SAFE_INTEGER;
  const n = Number(t);
  return Number.isFinite(n) ? n : 0;
};

/** `key value` lines (memory.stat, cpu.stat, cpuacct.stat) into a map. */
export function parseKeyValues(text: string | null): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of (text ?? '').split('\n')) {
    const [k, v] = line.trim().split(/\s+/);
    if (k && v !== undefined) out[k] = num(v);
  }
  return out;
}

/** cgroup v1 blkio lines: `8:0 Read 4096` (the `Total` line is dropped). */
export function parseBlkio(text: string | null): BlkioEntry[] {
  const out: BlkioEntry[] = [];
  for (const line of (text ?? '').split('\n')) {
    const m = /^(\d+):(\d+) (\S+) (\d+)$/.exec(line.trim());
    if (m) out.push({ major: Number(m[1]), minor: Number(m[2]), op: m[3]!, value: Number(m[4]) });
  }
  return out;
}

/** The host's CPU time in nanoseconds from /proc/stat (docker's system_cpu_usage). */
export function systemCpuUsage(procStat: string): number {
  const line = procStat.split('\n').find((l) => l.startsWith('cpu '));
  if (!line) return 0;
  const fields = line.trim().split(/\s+/).slice(1, 8).map(Number);
  return fields.reduce((a, b) => a + b, 0) * nsPerTick;
}

/** Where each controller of a cgroups path is (cgroup v1 hierarchy per controller, or v2). */
export async function controllerDirs(
  cgroupsPath: string,
): Promise<{ v2: string | null; v1: (c: string) => string }> {
  const unified = await read('/sys/fs/cgroup/cgroup.controllers');
  if (unified !== null) return { v2: join('/sys/fs/cgroup', cgroupsPath), v1: () => '' };
  return { v2: null, v1: (c) => join('/sys/fs/cgroup', c, cgroupsPath) };
}

/** Read a container's stats from its cgroups; null when the cgroup is gone. */
export async function readCgroupStats(cgroupsPath: string): Promise<ContainerStats | null> {
  const dirs = await controllerDirs(cgroupsPath);
  const procStat = (await read('/proc/stat')) ?? '';
  const hostMem = totalmem();
  if (dirs.v2) return readV2(dirs.v2, procStat, hostMem);
  const mem = dirs.v1('memory');
  const acct = dirs.v1('cpuacct');
  const [
    usage,
    maxUsage,
    failcnt,
    limit,
    memStat,
    cpuUsage,
    percpu,
    cpuacctStat,
    cpuStat,
    pidsCur,
    pidsMax,
    bytes,
    ios,
  ] = await Promise.all([
    read(join(mem, 'memory.usage_in_bytes')),
    read(join(mem, 'memory.max_usage_in_bytes')),
    read(join(mem, 'memory.failcnt')),
    read(join(mem, 'memory.limit_in_bytes')),
    read(join(mem, 'memory.stat')),
    read(join(acct, 'cpuacct.usage')),
    read(join(acct, 'cpuacct.usage_percpu')),
    read(join(acct, 'cpuacct.stat')),
    read(join(dirs.v1('cpu'), 'cpu.stat')),
    read(join(dirs.v1('pids'), 'pids.current')),
    read(join(dirs.v1('pids'), 'pids.max')),
    read(join(dirs.v1('blkio'), 'blkio.throttle.io_service_bytes_recursive')),
    read(join(dirs.v1('blkio'), 'blkio.throttle.io_serviced_recursive')),
  ]);
  if (usage === null && cpuUsage === null && pidsCur === null) return null;
  const percpuUsage = (percpu ?? '').trim().split(/\s+/).filter(Boolean).map(Number);
  const acctStat = parseKeyValues(cpuacctStat);
  const throttle = parseKeyValues(cpuStat);
  const memLimit = num(limit);
  const pids: ContainerStats['pids'] = { current: num(pidsCur) };
  if (pidsMax && pidsMax.trim() !== 'max') pids.limit = num(pidsMax);
  return {
    read: new Date(),
    pids,
    cpu: {
      totalUsage: num(cpuUsage),
      percpuUsage,
      usageInKernelmode: (acctStat.system ?? 0) * nsPerTick,
      usageInUsermode: (acctStat.user ?? 0) * nsPerTick,
      systemUsage: systemCpuUsage(procStat),
      onlineCpus: percpuUsage.length || (await onlineCpus()),
      throttling: {
        periods: throttle.nr_periods ?? 0,
        throttledPeriods: throttle.nr_throttled ?? 0,
        throttledTime: throttle.throttled_time ?? 0,
      },
    },
    memory: {
      usage: num(usage),
      maxUsage: num(maxUsage),
      failcnt: num(failcnt),
      limit: memLimit > 0 && memLimit < hostMem ? memLimit : hostMem,
      stats: parseKeyValues(memStat),
    },
    blkio: { ioServiceBytesRecursive: parseBlkio(bytes), ioServicedRecursive: parseBlkio(ios) },
  };
}

async function onlineCpus(): Promise<number> {
  const text = (await read('/sys/devices/system/cpu/online')) ?? '0';
  let n = 0;
  for (const part of text.trim().split(',')) {
    const [a, b] = part.split('-').map(Number);
    n += b === undefined ? 1 : b - a! + 1;
  }
  return n;
}

async function readV2(dir: string, procStat: string, hostMem: number): Promise<ContainerStats | null> {
  const [current, peak, max, memStat, cpuStat, pidsCur, pidsMax, events] = await Promise.all([
    read(join(dir, 'memory.current')),
    read(join(dir, 'memory.peak')),
    read(join(dir, 'memory.max')),
    read(join(dir, 'memory.stat')),
    read(join(dir, 'cpu.stat')),
    read(join(dir, 'pids.current')),
    read(join(dir, 'pids.max')),
    read(join(dir, 'memory.events')),
  ]);
  if (current === null && cpuStat === null && (await readdir(dir).catch(() => null)) === null) return null;
  const cpu = parseKeyValues(cpuStat);
  const memLimit = num(max);
  const pids: ContainerStats['pids'] = { current: num(pidsCur) };
  if (pidsMax && pidsMax.trim() !== 'max') pids.limit = num(pidsMax);
  return {
    read: new Date(),
    pids,
    cpu: {
      totalUsage: (cpu.usage_usec ?? 0) * 1000,
      percpuUsage: [],
      usageInKernelmode: (cpu.system_usec ?? 0) * 1000,
      usageInUsermode: (cpu.user_usec ?? 0) * 1000,
      systemUsage: systemCpuUsage(procStat),
      onlineCpus: await onlineCpus(),
      throttling: {
        periods: cpu.nr_periods ?? 0,
        throttledPeriods: cpu.nr_throttled ?? 0,
        throttledTime: (cpu.throttled_usec ?? 0) * 1000,
      },
    },
    memory: {
      usage: num(current),
      maxUsage: num(peak),
      failcnt: parseKeyValues(events).oom ?? 0,
      limit: memLimit > 0 && memLimit < hostMem ? memLimit : hostMem,
      stats: parseKeyValues(memStat),
    },
    blkio: { ioServiceBytesRecursive: [], ioServicedRecursive: [] },
  };
}
