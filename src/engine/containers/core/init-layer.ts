import type { InitEntry } from '../../storage/snapshotter.types.js';

/**
 * What every container's filesystem has below its writable layer, as dockerd's init layer
 * (daemon/initlayer): the mount points of the files and filesystems the runtime puts there
 * (/etc/hosts... are empty files until a start mounts the engine's), `/.dockerenv`, and /etc/mtab
 * pointing at /proc/mounts. Never a change of the container (docker diff, commit, SizeRw).
 */
export const CONTAINER_INIT: readonly InitEntry[] = [
  { path: '/dev/pts', type: 'dir', mode: 0o755 },
  { path: '/dev/shm', type: 'dir', mode: 0o755 },
  { path: '/proc', type: 'dir', mode: 0o755 },
  { path: '/sys', type: 'dir', mode: 0o755 },
  { path: '/.dockerenv', type: 'file', mode: 0o755 },
  { path: '/etc/resolv.conf', type: 'file', mode: 0o755 },
  { path: '/etc/hosts', type: 'file', mode: 0o755 },
  { path: '/etc/hostname', type: 'file', mode: 0o755 },
  { path: '/dev/console', type: 'file', mode: 0o755 },
  { path: '/etc/mtab', type: 'symlink', target: '/proc/mounts' },
];
