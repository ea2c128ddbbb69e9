import { constants } from 'node:fs';
import { realpath } from 'node:fs/promises';
import { join } from 'node:path';
import { errnoCode } from '../../../common/errors.js';
import { lstat, readdir, readFile, stat } from '../../../common/fs/quick.js';
import type { OciDevice } from './spec.types.js';

/** A device node as the OCI spec describes it (linux.devices). */
export type DeviceNode = OciDevice;

/** One limit of /proc/self/limits; `-1` stands for unlimited. */
export interface ProcessLimit {
  soft: number;
  hard: number;
}

/**
 * What spec generation needs to know about the host. The default reads the real machine; unit
 * tests pass their own.
 */
export interface SpecHost {
  /** The daemon's own limits, by Docker ulimit name (nofile, nproc, ...). */
  processLimits(): Promise<Map<string, ProcessLimit>>;
  /** Capabilities (CAP_*) in the daemon's bounding set: a container cannot get more. */
  capabilityBound(): Promise<Set<string>>;
  /** Whether /proc/sys/<name> exists (runc refuses unknown sysctls). */
  sysctlExists(name: string): Promise<boolean>;
  /** Whether the memory cgroup can limit swap (memory.memsw.limit_in_bytes exists). */
  swapLimitSupported(): Promise<boolean>;
  /** The device node at a host path, null when the path is not a device. Throws ENOENT. */
  statDevice(path: string): Promise<DeviceNode | null>;
  /** Paths of all device nodes below a host directory (recursively). */
  listDevices(dir: string): Promise<string[]>;
  /** The host's devices for privileged containers (as runc's HostDevices). */
  hostDevices(): Promise<DeviceNode[]>;
  /** The init binary for HostConfig.Init (docker-init), null when not installed. */
  initPath(): Promise<string | null>;
}

const limitNames: Record<string, string> = {
  'Max cpu time': 'cpu',
  'Max file size': 'fsize',
  'Max data size': 'data',
  'Max stack size': 'stack',
  'Max core file size': 'core',
  'Max resident set': 'rss',
  'Max processes': 'nproc',
  'Max open files': 'nofile',
  'Max locked memory': 'memlock',
  'Max address space': 'as',
  'Max file locks': 'locks',
  'Max pending signals': 'sigpending',
  'Max msgqueue size': 'msgqueue',
  'Max nice priority': 'nice',
  'Max realtime priority': 'rtprio',
  'Max realtime timeout': 'rttime',
};

/** Parse the text of /proc/<pid>/limits. */
export function parseProcLimits(text: string): Map<string, ProcessLimit> {
  const out = new Map<string, ProcessLimit>();
  for (const line of text.split('\n').slice(1)) {
    const m = /^(Max [a-z ]+?)\s{2,}(\S+)\s+(\S+)/.exec(line);
    if (!m) continue;
    const name = limitNames[m[1]!];
    if (!name) continue;
    const num = (v: string) => (v === 'unlimited' ? -1 : Number(v));
    out.set(name, { soft: num(m[2]!), hard: num(m[3]!) });
  }
  return out;
}

export const capabilityNames = [
  'CAP_CHOWN',
  'CAP_DAC_OVERRIDE',
  'CAP_DAC_READ_SEARCH',
  'CAP_FOWNER',
  'CAP_FSETID',
  'CAP_KILL',
  'CAP_SETGID',
  'CAP_SETUID',
  'CAP_SETPCAP',
  'CAP_LINUX_IMMUTABLE',
  'CAP_NET_BIND_SERVICE',
  'CAP_NET_BROADCAST',
  'CAP_NET_ADMIN',
  'CAP_NET_RAW',
  'CAP_IPC_LOCK',
  'CAP_IPC_OWNER',
  'CAP_SYS_MODULE',
  'CAP_SYS_RAWIO',
  'CAP_SYS_CHROOT',
  'CAP_SYS_PTRACE',
  'CAP_SYS_PACCT',
  'CAP_SYS_ADMIN',
  'CAP_SYS_BOOT',
  'CAP_SYS_NICE',
  'CAP_SYS_RESOURCE',
  'CAP_SYS_TIME',
  'CAP_SYS_TTY_CONFIG',
  'CAP_MKNOD',
  'CAP_LEASE',
  'CAP_AUDIT_WRITE',
  'CAP_AUDIT_CONTROL',
  'CAP_SETFCAP',
  'CAP_MAC_OVERRIDE',
  'CAP_MAC_ADMIN',
  'CAP_SYSLOG',
  'CAP_WAKE_ALARM',
  'CAP_BLOCK_SUSPEND',
  'CAP_AUDIT_READ',
  'CAP_PERFMON',
  'CAP_BPF',
  'CAP_CHECKPOINT_RESTORE',
] as const;

/** Capability names of a hex mask as in /proc/self/status (CapBnd). */
export function capsFromMask(hex: string): Set<string> {
  const mask = BigInt(`0x${hex}`);
  const out = new Set<string>();
  capabilityNames.forEach((name, bit) => {
    if ((mask >> BigInt(bit)) & 1n) out.add(name);
  });
  return out;
}

/** Major and minor numbers of a Linux dev_t. */
export function splitDev(rdev: bigint): { major: number; minor: number } {
  const major = Number(((rdev >> 8n) & 0xfffn) | ((rdev >> 32n) & ~0xfffn));
  const minor = Number((rdev & 0xffn) | ((rdev >> 12n) & ~0xffn));
  return { major, minor };
}

async function statDeviceNode(path: string, follow = true): Promise<DeviceNode | null> {
  const st = follow ? await stat(path, { bigint: true }) : await lstat(path, { bigint: true });
  const fmt = Number(st.mode) & constants.S_IFMT;
  let type: DeviceNode['type'];
  if (fmt === constants.S_IFCHR) type = 'c';
  else if (fmt === constants.S_IFBLK) type = 'b';
  else if (fmt === constants.S_IFIFO) type = 'p';
  else return null;
  const { major, minor } = splitDev(st.rdev);
  return {
    path,
    type,
    major,
    minor,
    fileMode: Number(st.mode) & 0o7777,
    uid: Number(st.uid),
    gid: Number(st.gid),
  };
}

async function walkDevices(
  dir: string,
  skip: (rel: string, isDir: boolean) => boolean,
  rel = '',
): Promise<string[]> {
  let entries: import('node:fs').Dirent[];
  try {
    entries = await readdir(join(dir, rel), { withFileTypes: true });
  } catch (err) {
    if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'EACCES') return [];
    throw err;
  }
  const out: string[] = [];
  for (const e of entries) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) {
      if (skip(r, true)) continue;
      out.push(...(await walkDevices(dir, skip, r)));
    } else if (e.isCharacterDevice() || e.isBlockDevice() || e.isFIFO()) {
      if (skip(r, false)) continue;
      out.push(join(dir, r));
    }
  }
  return out;
}

/** `fn`'s first answer, kept: a host fact that does not change while the engine runs. */
function once<T>(fn: () => Promise<T>): () => Promise<T> {
  let kept: Promise<T> | undefined;
  return () => {
    kept ??= fn().catch((err: unknown) => {
      kept = undefined;
      throw err;
    });
    return kept;
  };
}

const sysctlsSeen = new Map<string, Promise<boolean>>();

/**
 * The real machine. The daemon's limits, capability bound, sysctls and swap accounting are read
 * once (the driver reads the limits once at its start too): every spec used to read
 * /proc/self/limits and /proc/self/status and stat five files.
 */
export const realSpecHost: SpecHost = {
  processLimits: once(async () => parseProcLimits(await readFile('/proc/self/limits', 'utf8'))),
  capabilityBound: once(async () => {
    const status = await readFile('/proc/self/status', 'utf8');
    const m = /^CapBnd:\s*([0-9a-f]+)$/m.exec(status);
    return m ? capsFromMask(m[1]!) : new Set(capabilityNames);
  }),
  sysctlExists(name) {
    let seen = sysctlsSeen.get(name);
    if (!seen) {
      seen = stat(join('/proc/sys', name.replaceAll('.', '/'))).then(
        () => true,
        () => false,
      );
      sysctlsSeen.set(name, seen);
    }
    return seen;
  },
  swapLimitSupported: once(async () => {
    try {
      await stat('/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes');
      return true;
    } catch {
      try {
        await stat('/sys/fs/cgroup/memory.swap.max');
        return true;
      } catch {
        return false;
      }
    }
  }),
  statDevice: (path) => statDeviceNode(path),
  listDevices: (dir) => walkDevices(dir, () => false),
  async hostDevices() {
    // As runc's devices.HostDevices: everything under /dev except these.
    const skipDirs = new Set(['pts', 'shm', 'fd', 'mqueue', '.lxc', '.lxd-mounts', '.udev']);
    const paths = await walkDevices('/dev', (rel, isDir) =>
      isDir ? skipDirs.has(rel) : rel === 'console' || rel.startsWith('pts/'),
    );
    const out: DeviceNode[] = [];
    for (const p of paths) {
      try {
        const d = await statDeviceNode(p, false);
        if (d && d.type !== 'p') out.push(d);
      } catch {
        // vanished while we looked
      }
    }
    return out;
  },
  async initPath() {
    for (const p of ['/usr/bin/docker-init', '/usr/sbin/docker-init', '/usr/local/bin/docker-init']) {
      try {
        return await realpath(p);
      } catch {
        // next
      }
    }
    return null;
  },
};
