import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * What the host's cgroups support, as dockerd's pkg/sysinfo finds it: create refuses, warns about
 * or discards the resource settings the kernel cannot apply (verifyPlatformContainerResources),
 * and /info reports it. The one place that reads it.
 */
export interface SysInfo {
  memoryLimit: boolean;
  swapLimit: boolean;
  memoryReservation: boolean;
  oomKillDisable: boolean;
  memorySwappiness: boolean;
  kernelMemory: boolean;
  kernelMemoryTcp: boolean;
  cpuShares: boolean;
  cpuCfs: boolean;
  cpuRealtime: boolean;
  cpuset: boolean;
  /** Online CPUs and memory nodes in cgroup list form (`0-1`), '' when unknown. */
  cpus: string;
  mems: string;
  blkioWeight: boolean;
  blkioWeightDevice: boolean;
  blkioReadBpsDevice: boolean;
  blkioWriteBpsDevice: boolean;
  blkioReadIOpsDevice: boolean;
  blkioWriteIOpsDevice: boolean;
  pidsLimit: boolean;
  cgroupNamespaces: boolean;
  /** /proc/sys/net/ipv4/ip_forward is 0. */
  ipv4ForwardingDisabled: boolean;
}

const ROOT = '/sys/fs/cgroup';

function readTrimmed(path: string): string {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return '';
  }
}

/** cgroup v1 controllers (including the hybrid layout): files at the root of each hierarchy. */
function detectV1(): Omit<SysInfo, 'ipv4ForwardingDisabled'> {
  const has = (controller: string, ...files: string[]) =>
    files.some((f) => existsSync(join(ROOT, controller, f)));
  const mounted = (controller: string) => existsSync(join(ROOT, controller));
  const memory = mounted('memory');
  const cpuset = mounted('cpuset');
  return {
    memoryLimit: memory,
    swapLimit: has('memory', 'memory.memsw.limit_in_bytes'),
    memoryReservation: has('memory', 'memory.soft_limit_in_bytes'),
    oomKillDisable: has('memory', 'memory.oom_control'),
    memorySwappiness: has('memory', 'memory.swappiness'),
    kernelMemory: has('memory', 'memory.kmem.limit_in_bytes'),
    kernelMemoryTcp: has('memory', 'memory.kmem.tcp.limit_in_bytes'),
    cpuShares: has('cpu', 'cpu.shares'),
    cpuCfs: has('cpu', 'cpu.cfs_quota_us'),
    cpuRealtime: has('cpu', 'cpu.rt_period_us'),
    cpuset,
    cpus: cpuset ? readTrimmed(join(ROOT, 'cpuset', 'cpuset.cpus')) : '',
    mems: cpuset ? readTrimmed(join(ROOT, 'cpuset', 'cpuset.mems')) : '',
    // runc writes blkio.weight, or BFQ's blkio.bfq.weight where that is the one there
    blkioWeight: has('blkio', 'blkio.weight', 'blkio.bfq.weight'),
    blkioWeightDevice: has('blkio', 'blkio.weight_device', 'blkio.bfq.weight_device'),
    blkioReadBpsDevice: has('blkio', 'blkio.throttle.read_bps_device'),
    blkioWriteBpsDevice: has('blkio', 'blkio.throttle.write_bps_device'),
    blkioReadIOpsDevice: has('blkio', 'blkio.throttle.read_iops_device'),
    blkioWriteIOpsDevice: has('blkio', 'blkio.throttle.write_iops_device'),
    pidsLimit: mounted('pids'),
    cgroupNamespaces: existsSync('/proc/self/ns/cgroup'),
  };
}

/** cgroup v2 only: by the root's controllers, as dockerd's newV2 decides. */
function detectV2(): Omit<SysInfo, 'ipv4ForwardingDisabled'> {
  const controllers = new Set(readTrimmed(join(ROOT, 'cgroup.controllers')).split(/\s+/));
  const memory = controllers.has('memory');
  const cpu = controllers.has('cpu');
  const io = controllers.has('io');
  const cpuset = controllers.has('cpuset');
  return {
    memoryLimit: memory,
    swapLimit: memory && existsSync(join(ROOT, 'memory.swap.max')),
    memoryReservation: memory,
    oomKillDisable: false,
    memorySwappiness: false,
    kernelMemory: false,
    kernelMemoryTcp: false,
    cpuShares: cpu,
    cpuCfs: cpu,
    cpuRealtime: false,
    cpuset,
    cpus: cpuset ? readTrimmed(join(ROOT, 'cpuset.cpus.effective')) : '',
    mems: cpuset ? readTrimmed(join(ROOT, 'cpuset.mems.effective')) : '',
    blkioWeight: io,
    blkioWeightDevice: io,
    blkioReadBpsDevice: io,
    blkioWriteBpsDevice: io,
    blkioReadIOpsDevice: io,
    blkioWriteIOpsDevice: io,
    pidsLimit: controllers.has('pids'),
    cgroupNamespaces: existsSync('/proc/self/ns/cgroup'),
  };
}

let cgroups: Omit<SysInfo, 'ipv4ForwardingDisabled'> | undefined;

/** The host's support (cgroups read once; IP forwarding read every time, it can be switched). */
export function hostSysInfo(): SysInfo {
  cgroups ??= existsSync(join(ROOT, 'cgroup.controllers')) ? detectV2() : detectV1();
  const onlineCpus = cgroups.cpus || readTrimmed('/sys/devices/system/cpu/online');
  const onlineMems = cgroups.mems || readTrimmed('/sys/devices/system/node/online') || '0';
  return {
    ...cgroups,
    cpus: onlineCpus,
    mems: onlineMems,
    ipv4ForwardingDisabled: readTrimmed('/proc/sys/net/ipv4/ip_forward') === '0',
  };
}

/** A host where everything is supported (for tests): CPUs and memory nodes as given. */
export function fullSysInfo(cpus = '0-1', mems = '0'): SysInfo {
  return {
    memoryLimit: true,
    swapLimit: true,
    memoryReservation: true,
    oomKillDisable: true,
    memorySwappiness: true,
    kernelMemory: true,
    kernelMemoryTcp: true,
    cpuShares: true,
    cpuCfs: true,
    cpuRealtime: true,
    cpuset: true,
    cpus,
    mems,
    blkioWeight: true,
    blkioWeightDevice: true,
    blkioReadBpsDevice: true,
    blkioWriteBpsDevice: true,
    blkioReadIOpsDevice: true,
    blkioWriteIOpsDevice: true,
    pidsLimit: true,
    cgroupNamespaces: true,
    ipv4ForwardingDisabled: false,
  };
}
