import type { HostConfig, ThrottleDevice } from '../../../common/docker-types.js';
import { errnoCode, invalidParameter } from '../../../common/errors.js';
import type { SpecHost } from './host.js';
import type {
  OciBlockIO,
  OciCpu,
  OciDeviceRule,
  OciMemory,
  OciResources,
  OciThrottleDevice,
} from './spec.types.js';

async function deviceNumbers(host: SpecHost, path: string): Promise<{ major: number; minor: number }> {
  try {
    const d = await host.statDevice(path);
    if (d) return { major: d.major, minor: d.minor };
  } catch (err) {
    if (errnoCode(err) !== 'ENOENT') throw err;
  }
  throw invalidParameter(`${path} is not a device`);
}

async function throttles(host: SpecHost, list: ThrottleDevice[] | null | undefined) {
  const out: OciThrottleDevice[] = [];
  for (const t of list ?? []) out.push({ ...(await deviceNumbers(host, t.Path)), rate: t.Rate });
  return out;
}

/**
 * linux.resources as dockerd makes them (getMemoryResources, getCPUResources, getPidsLimit, blkio).
 * KernelMemory is ignored (runc 1.1 and cgroup v2 have no kernel memory limit). MemorySwap defaults
 * to twice Memory as dockerd, and is left out when the kernel cannot limit swap.
 */
export async function planResources(
  hc: HostConfig,
  devices: OciDeviceRule[],
  host: SpecHost,
  warnings: string[],
): Promise<OciResources> {
  const res: OciResources = { devices };

  const memory: OciMemory = {};
  if (hc.Memory && hc.Memory > 0) memory.limit = hc.Memory;
  if (hc.MemoryReservation && hc.MemoryReservation > 0) memory.reservation = hc.MemoryReservation;
  let swap = hc.MemorySwap ?? 0;
  // twice the limit, within int64 (runc reads the swap limit as one)
  if (swap === 0 && hc.Memory && hc.Memory > 0) swap = Math.min(hc.Memory * 2, 2 ** 63);
  if (swap > 0) {
    if (await host.swapLimitSupported()) memory.swap = swap;
    else if (hc.MemorySwap && hc.MemorySwap > 0) {
      warnings.push(
        'Your kernel does not support swap limit capabilities or the cgroup is not mounted. Memory limited without swap.',
      );
    }
  }
  if (hc.MemorySwappiness !== undefined && hc.MemorySwappiness !== null && hc.MemorySwappiness >= 0) {
    if (hc.MemorySwappiness > 100)
      throw invalidParameter(`invalid value: ${hc.MemorySwappiness}, valid memory swappiness range is 0-100`);
    memory.swappiness = hc.MemorySwappiness;
  }
  if (hc.OomKillDisable !== undefined && hc.OomKillDisable !== null)
    memory.disableOOMKiller = hc.OomKillDisable;
  if (Object.keys(memory).length > 0) res.memory = memory;

  const cpu: OciCpu = {};
  if (hc.CpuShares !== undefined && hc.CpuShares < 0) throw invalidParameter('shares: invalid argument');
  if (hc.CpuShares && hc.CpuShares > 0) cpu.shares = hc.CpuShares;
  if (hc.CpusetCpus) cpu.cpus = hc.CpusetCpus;
  if (hc.CpusetMems) cpu.mems = hc.CpusetMems;
  if (hc.NanoCpus && hc.NanoCpus > 0) {
    if (hc.CpuPeriod || hc.CpuQuota) {
      throw invalidParameter('Conflicting options: Nano CPUs and CPU Period cannot both be set');
    }
    const period = 100000;
    cpu.period = period;
    cpu.quota = Math.floor((hc.NanoCpus * period) / 1e9);
  }
  if (hc.CpuPeriod) cpu.period = hc.CpuPeriod;
  if (hc.CpuQuota) cpu.quota = hc.CpuQuota;
  if (hc.CpuRealtimePeriod) cpu.realtimePeriod = hc.CpuRealtimePeriod;
  if (hc.CpuRealtimeRuntime) cpu.realtimeRuntime = hc.CpuRealtimeRuntime;
  if (Object.keys(cpu).length > 0) res.cpu = cpu;

  if (hc.PidsLimit !== undefined && hc.PidsLimit !== null) {
    res.pids = { limit: hc.PidsLimit <= 0 ? -1 : hc.PidsLimit };
  }

  const blockIO: OciBlockIO = {};
  if (hc.BlkioWeight) {
    if (hc.BlkioWeight < 10 || hc.BlkioWeight > 1000)
      throw invalidParameter('Range of blkio weight is from 10 to 1000');
    blockIO.weight = hc.BlkioWeight;
  }
  if (hc.BlkioWeightDevice?.length) {
    const list = [];
    for (const w of hc.BlkioWeightDevice)
      list.push({ ...(await deviceNumbers(host, w.Path)), weight: w.Weight });
    blockIO.weightDevice = list;
  }
  const pairs: [keyof HostConfig, keyof OciBlockIO & `throttle${string}`][] = [
    ['BlkioDeviceReadBps', 'throttleReadBpsDevice'],
    ['BlkioDeviceWriteBps', 'throttleWriteBpsDevice'],
    ['BlkioDeviceReadIOps', 'throttleReadIOPSDevice'],
    ['BlkioDeviceWriteIOps', 'throttleWriteIOPSDevice'],
  ];
  for (const [field, key] of pairs) {
    const list = await throttles(host, hc[field] as ThrottleDevice[] | null | undefined);
    if (list.length > 0) blockIO[key] = list;
  }
  if (Object.keys(blockIO).length > 0) res.blockIO = blockIO;
  return res;
}
