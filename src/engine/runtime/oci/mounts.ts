import { posix } from 'node:path';
import type { SpecInput, SpecMount } from '../runtime.types.js';

export const defaultShmSize = 64 * 1024 * 1024;

/** moby's default masked paths (oci/defaults.go). */
export const defaultMaskedPaths: readonly string[] = [
  '/proc/asound',
  '/proc/acpi',
  '/proc/kcore',
  '/proc/keys',
  '/proc/latency_stats',
  '/proc/timer_list',
  '/proc/timer_stats',
  '/proc/sched_debug',
  '/proc/scsi',
  '/sys/firmware',
];

/** moby's default read-only paths. */
export const defaultReadonlyPaths: readonly string[] = [
  '/proc/bus',
  '/proc/fs',
  '/proc/irq',
  '/proc/sys',
  '/proc/sysrq-trigger',
];

function defaultMounts(): SpecMount[] {
  return [
    { destination: '/proc', type: 'proc', source: 'proc', options: ['nosuid', 'noexec', 'nodev'] },
    {
      destination: '/dev',
      type: 'tmpfs',
      source: 'tmpfs',
      options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'],
    },
    {
      destination: '/dev/pts',
      type: 'devpts',
      source: 'devpts',
      options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620', 'gid=5'],
    },
    { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
    {
      destination: '/sys/fs/cgroup',
      type: 'cgroup',
      source: 'cgroup',
      options: ['ro', 'nosuid', 'noexec', 'nodev'],
    },
    { destination: '/dev/mqueue', type: 'mqueue', source: 'mqueue', options: ['nosuid', 'noexec', 'nodev'] },
    {
      destination: '/dev/shm',
      type: 'tmpfs',
      source: 'shm',
      options: ['nosuid', 'noexec', 'nodev', 'mode=1777'],
    },
  ];
}

const depth = (dest: string) => posix.normalize(dest).split('/').length;

export interface MountPlan {
  mounts: SpecMount[];
  rootfsPropagation?: string;
}

/**
 * The spec's mounts as dockerd makes them: the defaults (minus those a user mount replaces, all of
 * /dev/* when /dev itself is mounted, /dev/shm for IpcMode none; /dev/shm sized by ShmSize, or the
 * host's /dev/shm for IpcMode host), then the network files and the engine's mounts sorted by depth.
 */
export function planMounts(
  input: Pick<SpecInput, 'hostConfig' | 'hostsPath' | 'hostnamePath' | 'resolvConfPath' | 'mounts'>,
): MountPlan {
  const hc = input.hostConfig;
  const ipcMode = (hc.IpcMode ?? '').trim();
  const readonlyRoot = hc.ReadonlyRootfs === true;

  const user: SpecMount[] = input.mounts.map((m) => ({ ...m, options: [...m.options] }));
  const userDest = new Set(user.map((m) => posix.normalize(m.destination)));
  const network: SpecMount[] = [];
  const networkFiles: [string, string][] = [
    ['/etc/resolv.conf', input.resolvConfPath],
    ['/etc/hostname', input.hostnamePath],
    ['/etc/hosts', input.hostsPath],
  ];
  for (const [dest, source] of networkFiles) {
    if (!source || userDest.has(dest)) continue;
    const options = ['rbind', 'rprivate'];
    if (readonlyRoot) options.push('ro');
    network.push({ destination: dest, type: 'bind', source, options });
  }
  if (ipcMode === 'host' && !userDest.has('/dev/shm')) {
    network.push({
      destination: '/dev/shm',
      type: 'bind',
      source: '/dev/shm',
      options: ['rbind', 'rprivate'],
    });
  }
  const extra = [...network, ...user];
  const extraDest = new Set(extra.map((m) => posix.normalize(m.destination)));
  const mountDev = extraDest.has('/dev');

  const mounts: SpecMount[] = [];
  for (const m of defaultMounts()) {
    if (extraDest.has(m.destination)) continue;
    if (mountDev && m.destination.startsWith('/dev/')) continue;
    if (m.destination === '/dev/shm') {
      if (ipcMode === 'none') continue;
      const size = hc.ShmSize && hc.ShmSize > 0 ? hc.ShmSize : defaultShmSize;
      m.options.push(`size=${size}`);
    }
    mounts.push(m);
  }
  // stable sort by path depth, so parents are mounted before their children
  const sorted = extra
    .map((m, i) => ({ m, i }))
    .sort((a, b) => depth(a.m.destination) - depth(b.m.destination) || a.i - b.i);
  mounts.push(...sorted.map((x) => x.m));

  if (readonlyRoot) {
    const keepRw = new Set(['/proc', '/dev/pts', '/dev/shm', '/dev/mqueue', '/dev']);
    for (const m of mounts) {
      if (keepRw.has(m.destination) || extraDest.has(posix.normalize(m.destination))) continue;
      if (!m.options.includes('ro')) m.options.push('ro');
    }
  }
  if (hc.Privileged) {
    for (const m of mounts) {
      if (m.destination === '/sys' || m.type === 'cgroup') m.options = m.options.filter((o) => o !== 'ro');
    }
  }

  let rootfsPropagation: string | undefined;
  for (const m of user) {
    if (m.options.some((o) => o === 'shared' || o === 'rshared')) rootfsPropagation = 'shared';
    else if (!rootfsPropagation && m.options.some((o) => o === 'slave' || o === 'rslave'))
      rootfsPropagation = 'rslave';
  }
  return rootfsPropagation ? { mounts, rootfsPropagation } : { mounts };
}
