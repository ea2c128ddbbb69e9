import { existsSync } from 'node:fs';
import { readdir, readFile, statfs } from 'node:fs/promises';
import os from 'node:os';
import { hostSysInfo } from '../runtime/sysinfo.js';

/** Facts about the host the engine runs on, read from the kernel as dockerd reads them. */
export interface HostFacts {
  kernelVersion: string;
  operatingSystem: string;
  osVersion: string;
  architecture: string;
  ncpu: number;
  memTotal: number;
  hostname: string;
  cgroupVersion: '1' | '2';
  cgroup: {
    memoryLimit: boolean;
    swapLimit: boolean;
    kernelMemory: boolean;
    kernelMemoryTcp: boolean;
    cpuCfsPeriod: boolean;
    cpuCfsQuota: boolean;
    cpuShares: boolean;
    cpuSet: boolean;
    pidsLimit: boolean;
    oomKillDisable: boolean;
  };
  ipv4Forwarding: boolean;
  bridgeNfIptables: boolean;
  bridgeNfIp6tables: boolean;
}

async function readTrim(path: string): Promise<string | undefined> {
  try {
    return (await readFile(path, 'utf8')).trim();
  } catch {
    return undefined;
  }
}

export async function readOsRelease(): Promise<{ prettyName: string; versionId: string }> {
  const text = (await readTrim('/etc/os-release')) ?? (await readTrim('/usr/lib/os-release')) ?? '';
  const values = new Map<string, string>();
  for (const line of text.split('\n')) {
    const i = line.indexOf('=');
    if (i > 0) values.set(line.slice(0, i), line.slice(i + 1).replace(/^"|"$/g, ''));
  }
  return { prettyName: values.get('PRETTY_NAME') ?? 'Linux', versionId: values.get('VERSION_ID') ?? '' };
}

const cg = '/sys/fs/cgroup';

export async function readHostFacts(): Promise<HostFacts> {
  const osRelease = await readOsRelease();
  const si = hostSysInfo();
  return {
    kernelVersion: os.release(),
    operatingSystem: osRelease.prettyName,
    osVersion: osRelease.versionId,
    architecture: os.machine(),
    ncpu: os.availableParallelism(),
    memTotal: os.totalmem(),
    hostname: os.hostname(),
    cgroupVersion: existsSync(`${cg}/cgroup.controllers`) ? '2' : '1',
    cgroup: {
      memoryLimit: si.memoryLimit,
      swapLimit: si.swapLimit,
      kernelMemory: si.kernelMemory,
      kernelMemoryTcp: si.kernelMemoryTcp,
      cpuCfsPeriod: si.cpuCfs,
      cpuCfsQuota: si.cpuCfs,
      cpuShares: si.cpuShares,
      cpuSet: si.cpuset,
      pidsLimit: si.pidsLimit,
      oomKillDisable: si.oomKillDisable,
    },
    ipv4Forwarding: !si.ipv4ForwardingDisabled,
    bridgeNfIptables: (await readTrim('/proc/sys/net/bridge/bridge-nf-call-iptables')) === '1',
    bridgeNfIp6tables: (await readTrim('/proc/sys/net/bridge/bridge-nf-call-ip6tables')) === '1',
  };
}

/** The backing filesystem's name as dockerd reports it in DriverStatus. */
export async function backingFilesystem(path: string): Promise<string> {
  const magic: Record<number, string> = {
    61267: 'extfs',
    1481003842: 'xfs',
    2435016766: 'btrfs',
    16914836: 'tmpfs',
    2035054128: 'overlayfs',
    801189825: 'zfs',
    26985: 'nfs',
  };
  try {
    const s = await statfs(path);
    return magic[s.type] ?? `<unknown ${s.type.toString(16)}>`;
  } catch {
    return '<unknown>';
  }
}

export async function openFileDescriptors(): Promise<number> {
  try {
    return (await readdir('/proc/self/fd')).length;
  } catch {
    return 0;
  }
}
