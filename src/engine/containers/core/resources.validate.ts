import { cpus } from 'node:os';
import { isAbsolute } from 'node:path';
import type { HostConfig } from '../../../common/docker-types.js';
import { invalidParameter } from '../../../common/errors.js';
import type { SysInfo } from '../../runtime/sysinfo.js';

const MIN_MEMORY = 6 * 1024 * 1024;

/** HostConfig's lists of per-device blkio settings. */
type BlkioListField =
  | 'BlkioWeightDevice'
  | 'BlkioDeviceReadBps'
  | 'BlkioDeviceWriteBps'
  | 'BlkioDeviceReadIOps'
  | 'BlkioDeviceWriteIOps';

export interface HostValidation {
  /** KernelMemory is honoured (API before 1.42: the API layer decides). */
  kernelMemory: boolean;
  /** Swap can be limited (else the limit is discarded with dockerd's warning); default: sysInfo's. */
  swapSupported?: boolean;
  /** What the host's cgroups support; default: this host's. */
  sysInfo?: SysInfo;
  /** Runtime names HostConfig.Runtime may give; default: KNOWN_RUNTIMES. */
  runtimes?: readonly string[];
  /** The settings of an update (docker update), not of a create: a swap limit may come alone. */
  update?: boolean;
}

/** Create-time checks of a HostConfig's resources (memory, CPU, blkio, pids...), with dockerd's messages, warnings and discards. */
/**
 * A cgroup list (`0-2,5`) as dockerd's parsers.ParseUintList reads it; `maximum` bounds the
 * values (0: none). Throws the message dockerd wraps.
 */
export function parseUintList(value: string, maximum = 0): Set<number> {
  const out = new Set<number>();
  if (value === '') return out;
  const bad = () => new Error(`invalid format: ${value}`);
  const num = (s: string) => {
    if (!/^[+-]?\d+$/.test(s)) throw bad();
    return Number(s);
  };
  for (const part of value.split(',')) {
    const dash = part.indexOf('-');
    const [min, max] =
      dash < 0 ? [num(part), num(part)] : [num(part.slice(0, dash)), num(part.slice(dash + 1))];
    if (max < min) throw bad();
    if (maximum !== 0 && max > maximum) throw new Error(`value of out range, maximum is ${maximum}`);
    for (let i = min; i <= max && out.size <= 1 << 16; i++) out.add(i);
  }
  return out;
}

/** dockerd's isCpusetListAvailable: every requested CPU (or node) is in the available list. */
export function cpusetAvailable(provided: string, available: string, what: 'cpus' | 'mems'): boolean {
  let avail: Set<number>;
  let wanted: Set<number>;
  try {
    avail = parseUintList(available);
    let max = 8192;
    for (const m of avail) if (m > max) max = m;
    wanted = parseUintList(provided, max);
  } catch (err) {
    throw invalidParameter(`Invalid value ${provided} for cpuset ${what}: ${(err as Error).message}`);
  }
  for (const n of wanted) if (!avail.has(n)) return false;
  return true;
}

/**
 * dockerd's verifyPlatformContainerResources (daemon_unix.go) in its order: refusals, warnings,
 * and what the kernel cannot do discarded from `hc` (so inspect shows what applies), plus
 * berth's own refusals of values that would only fail at start.
 */
export function checkResources(hc: HostConfig, opts: Required<HostValidation>, warnings: string[]): void {
  const si = opts.sysInfo;
  const swapLimit = opts.swapSupported;
  if (hc.MemorySwappiness === -1) hc.MemorySwappiness = null;

  // memory
  const mem0 = hc.Memory ?? 0;
  if (mem0 !== 0 && mem0 < MIN_MEMORY) throw invalidParameter('Minimum memory limit allowed is 6MB');
  if (mem0 > 0 && !si.memoryLimit) {
    warnings.push(
      'Your kernel does not support memory limit capabilities or the cgroup is not mounted. Limitation discarded.',
    );
    hc.Memory = 0;
    hc.MemorySwap = -1;
  }
  const mem = hc.Memory ?? 0;
  if ((hc.MemorySwap ?? 0) < -1) throw invalidParameter('invalid memory swap limit: use -1 for unlimited');
  if (mem > 0 && (hc.MemorySwap ?? 0) !== -1 && !swapLimit) {
    warnings.push(
      'Your kernel does not support swap limit capabilities or the cgroup is not mounted. Memory limited without swap.',
    );
    hc.MemorySwap = -1;
  }
  const swap = hc.MemorySwap ?? 0;
  if (mem > 0 && swap > 0 && swap < mem) {
    throw invalidParameter('Minimum memoryswap limit should be larger than memory limit, see usage');
  }
  if (mem === 0 && swap > 0 && !opts.update) {
    throw invalidParameter('You should always set the Memory limit when using Memoryswap limit, see usage');
  }
  if (hc.MemorySwappiness !== undefined && hc.MemorySwappiness !== null && !si.memorySwappiness) {
    warnings.push(
      'Your kernel does not support memory swappiness capabilities or the cgroup is not mounted. Memory swappiness discarded.',
    );
    hc.MemorySwappiness = null;
  }
  const swappiness = hc.MemorySwappiness;
  if (swappiness !== undefined && swappiness !== null && (swappiness < 0 || swappiness > 100)) {
    throw invalidParameter(`Invalid value: ${swappiness}, valid memory swappiness range is 0-100`);
  }
  if ((hc.MemoryReservation ?? 0) > 0 && !si.memoryReservation) {
    warnings.push(
      'Your kernel does not support memory soft limit capabilities or the cgroup is not mounted. Limitation discarded.',
    );
    hc.MemoryReservation = 0;
  }
  const res = hc.MemoryReservation ?? 0;
  if (res > 0 && res < MIN_MEMORY) throw invalidParameter('Minimum memory reservation allowed is 6MB');
  if (mem > 0 && res > 0 && mem < res) {
    throw invalidParameter('Minimum memory limit can not be less than memory reservation limit, see usage');
  }
  if (opts.kernelMemory && (hc.KernelMemory ?? 0) > 0) {
    warnings.push('Specifying a kernel memory limit is deprecated and will be removed in a future release.');
    if (!si.kernelMemory) {
      warnings.push(
        'Your kernel does not support kernel memory limit capabilities or the cgroup is not mounted. Limitation discarded.',
      );
      hc.KernelMemory = 0;
    }
    const kmem = hc.KernelMemory ?? 0;
    if (kmem > 0 && kmem < MIN_MEMORY) throw invalidParameter('Minimum kernel memory limit allowed is 6MB');
  }
  if (hc.OomKillDisable !== undefined && hc.OomKillDisable !== null && !si.oomKillDisable) {
    if (hc.OomKillDisable)
      warnings.push('Your kernel does not support OomKillDisable. OomKillDisable discarded.');
    hc.OomKillDisable = null;
  }
  if (hc.OomKillDisable && mem === 0) {
    warnings.push(
      'OOM killer is disabled for the container, but no memory limit is set, this can result in the system running out of resources.',
    );
  }
  if (hc.PidsLimit !== undefined && hc.PidsLimit !== null && !si.pidsLimit) {
    if (hc.PidsLimit > 0) {
      warnings.push(
        'Your kernel does not support PIDs limit capabilities or the cgroup is not mounted. PIDs limit discarded.',
      );
    }
    hc.PidsLimit = null;
  }

  // cpu
  const nano = hc.NanoCpus ?? 0;
  if (nano > 0 && (hc.CpuPeriod ?? 0) > 0) {
    throw invalidParameter('Conflicting options: Nano CPUs and CPU Period cannot both be set');
  }
  if (nano > 0 && (hc.CpuQuota ?? 0) > 0) {
    throw invalidParameter('Conflicting options: Nano CPUs and CPU Quota cannot both be set');
  }
  if (nano > 0 && !si.cpuCfs) {
    throw invalidParameter(
      'NanoCPUs can not be set, as your kernel does not support CPU CFS scheduler or the cgroup is not mounted',
    );
  }
  // os.cpus() reads /proc/cpuinfo and /proc/stat: only for a create that sets NanoCpus
  const ncpu = nano === 0 ? 0 : cpus().length;
  if (nano < 0 || (nano > 0 && nano > ncpu * 1e9)) {
    throw invalidParameter(
      `Range of CPUs is from 0.01 to ${ncpu}.00, as there are only ${ncpu} CPUs available`,
    );
  }
  if ((hc.CpuShares ?? 0) < 0) throw invalidParameter('invalid CPU shares: must not be negative');
  if ((hc.CpuShares ?? 0) > 0 && !si.cpuShares) {
    warnings.push('Your kernel does not support CPU shares or the cgroup is not mounted. Shares discarded.');
    hc.CpuShares = 0;
  }
  if (((hc.CpuPeriod ?? 0) !== 0 || (hc.CpuQuota ?? 0) !== 0) && !si.cpuCfs) {
    warnings.push('Your kernel does not support CPU CFS scheduler. CPU period/quota discarded.');
    hc.CpuPeriod = 0;
    hc.CpuQuota = 0;
  }
  const period = hc.CpuPeriod ?? 0;
  if (period !== 0 && (period < 1000 || period > 1_000_000)) {
    throw invalidParameter(
      'CPU cfs period can not be less than 1ms (i.e. 1000) or larger than 1s (i.e. 1000000)',
    );
  }
  const quota = hc.CpuQuota ?? 0;
  if (quota > 0 && quota < 1000) throw invalidParameter('CPU cfs quota can not be less than 1ms (i.e. 1000)');
  if ((hc.CpuPercent ?? 0) > 0) {
    warnings.push('linux does not support CPU percent. Percent discarded.');
    hc.CpuPercent = 0;
  }

  // cpuset
  if ((hc.CpusetCpus || hc.CpusetMems) && !si.cpuset) {
    warnings.push('Your kernel does not support cpuset or the cgroup is not mounted. Cpuset discarded.');
    hc.CpusetCpus = '';
    hc.CpusetMems = '';
  }
  if (hc.CpusetCpus && !cpusetAvailable(hc.CpusetCpus, si.cpus, 'cpus')) {
    throw invalidParameter(
      `Requested CPUs are not available - requested ${hc.CpusetCpus}, available: ${si.cpus}`,
    );
  }
  if (hc.CpusetMems && !cpusetAvailable(hc.CpusetMems, si.mems, 'mems')) {
    throw invalidParameter(
      `Requested memory nodes are not available - requested ${hc.CpusetMems}, available: ${si.mems}`,
    );
  }

  // blkio
  if ((hc.BlkioWeight ?? 0) > 0 && !si.blkioWeight) {
    warnings.push(
      'Your kernel does not support Block I/O weight or the cgroup is not mounted. Weight discarded.',
    );
    hc.BlkioWeight = 0;
  }
  const blkio = hc.BlkioWeight ?? 0;
  if (blkio > 0 && (blkio < 10 || blkio > 1000)) {
    throw invalidParameter('Range of blkio weight is from 10 to 1000');
  }
  const lists: [BlkioListField, boolean, string][] = [
    [
      'BlkioWeightDevice',
      si.blkioWeightDevice,
      'Your kernel does not support Block I/O weight_device or the cgroup is not mounted. Weight-device discarded.',
    ],
    [
      'BlkioDeviceReadBps',
      si.blkioReadBpsDevice,
      'Your kernel does not support BPS Block I/O read limit or the cgroup is not mounted. Block I/O BPS read limit discarded.',
    ],
    [
      'BlkioDeviceWriteBps',
      si.blkioWriteBpsDevice,
      'Your kernel does not support BPS Block I/O write limit or the cgroup is not mounted. Block I/O BPS write limit discarded.',
    ],
    [
      'BlkioDeviceReadIOps',
      si.blkioReadIOpsDevice,
      'Your kernel does not support IOPS Block read limit or the cgroup is not mounted. Block I/O IOPS read limit discarded.',
    ],
    [
      'BlkioDeviceWriteIOps',
      si.blkioWriteIOpsDevice,
      'Your kernel does not support IOPS Block write limit or the cgroup is not mounted. Block I/O IOPS write limit discarded.',
    ],
  ];
  for (const [field, supported, warning] of lists) {
    const list: ReadonlyArray<unknown> | null | undefined = hc[field];
    if (!list?.length) continue;
    if (!supported) {
      warnings.push(warning);
      hc[field] = [];
      continue;
    }
    for (const d of list) {
      if (!d || typeof d !== 'object') throw invalidParameter(`invalid ${field}: an entry is null`);
      const path = (d as { Path?: string }).Path;
      if (!path || !isAbsolute(path))
        throw invalidParameter(`invalid ${field}: "${path ?? ''}" is not a device path`);
    }
  }
  for (const w of hc.BlkioWeightDevice ?? []) {
    if (w.Weight !== 0 && (w.Weight < 10 || w.Weight > 1000)) {
      throw invalidParameter('Range of blkio weight is from 10 to 1000');
    }
  }

  if ((hc.ShmSize ?? 0) < 0) throw invalidParameter('SHM size can not be less than 0');
  const oom = hc.OomScoreAdj ?? 0;
  if (oom < -1000 || oom > 1000) {
    throw invalidParameter(`Invalid value ${oom}, range for oom score adj is [-1000, 1000]`);
  }
  for (const u of hc.Ulimits ?? []) {
    if (!u || typeof u.Name !== 'string' || u.Soft > u.Hard) {
      throw invalidParameter(`invalid ulimit: ${JSON.stringify(u)}: soft limit must not exceed hard limit`);
    }
  }
  for (const d of hc.Devices ?? []) {
    if (!d || typeof d !== 'object') throw invalidParameter('invalid Devices: an entry is null');
  }
  for (const d of hc.DeviceRequests ?? []) {
    if (!d || typeof d !== 'object') throw invalidParameter('invalid DeviceRequests: an entry is null');
  }
}
