import { existsSync } from 'node:fs';
import { mkdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { ContainerConfig } from '../../common/docker-types.js';
import { conflict, errorMessage } from '../../common/errors.js';
import type { OciSpec, SpecInput, SpecMount, StartOptions } from '../runtime/index.js';
import { monitorLogSizeMax } from '../runtime/index.js';
import { bundlePath, type Container, get, type Internals, rootfsPath } from './container.js';
import { writeContainerFiles } from './files.js';
import { mergeLinkEnv } from './links.js';
import { logLimits, writesLog } from './logging.js';
import { parseBind } from './mounts.validate.js';
import { beginStartNetwork, startNetworkReady } from './network.js';
import { releaseVolumeMounts, volumeSpecMounts } from './volumes.js';

/**
 * What a start needs besides the state machine: the mounted rootfs, the container's files,
 * namespaces to join, mounts, and the runtime's start options.
 */

export type SpecBuilder = (input: SpecInput, options?: { warnings?: string[] }) => Promise<OciSpec>;

/** Is `target` a mount point (per /proc/self/mountinfo)? */
export async function isMounted(target: string): Promise<boolean> {
  try {
    const info = await readFile('/proc/self/mountinfo', 'utf8');
    return info.split('\n').some((l) => l.split(' ')[4] === target);
  } catch {
    return false;
  }
}

export async function mountRootfs(ix: Internals, c: Container): Promise<string> {
  const target = await rootfsPath(ix, c.id);
  await mkdir(target, { recursive: true });
  if (!(await isMounted(target))) await ix.images.snapshotter.mount(c.id, target);
  c.rootfsMounted = true;
  return target;
}

export async function unmountRootfs(ix: Internals, c: Container): Promise<void> {
  await releaseVolumeMounts(ix, c);
  const target = await rootfsPath(ix, c.id);
  if (await isMounted(target)) await ix.images.snapshotter.unmount(target);
  c.rootfsMounted = false;
}

function nsPathOf(ix: Internals, ref: string, kind: 'net' | 'pid' | 'ipc' | 'uts', what: string): string {
  const other = get(ix, ref);
  if (!other.state.Running || other.state.Restarting || other.state.Pid <= 0) {
    throw conflict(`cannot join ${what} of a non running container: ${other.id}`);
  }
  return `/proc/${other.state.Pid}/ns/${kind}`;
}

function bindMounts(c: Container): SpecMount[] {
  const out: SpecMount[] = [];
  const hc = c.hostConfig;
  for (const b of hc.Binds ?? []) {
    const p = parseBind(b);
    if (p.kind === 'volume') continue; // a volume: one of the record's MountPoints
    const opts = ['rbind', p.readOnly ? 'ro' : 'rw'];
    if (p.propagation) opts.push(p.propagation);
    out.push({ destination: p.destination, type: 'bind', source: p.source, options: opts });
  }
  for (const m of hc.Mounts ?? []) {
    if (m.Type === 'bind') {
      const opts = [m.BindOptions?.NonRecursive ? 'bind' : 'rbind', m.ReadOnly ? 'ro' : 'rw'];
      if (m.BindOptions?.Propagation) opts.push(m.BindOptions.Propagation);
      out.push({ destination: m.Target ?? '', type: 'bind', source: m.Source ?? '', options: opts });
    } else if (m.Type === 'tmpfs') {
      const opts = ['nosuid', 'nodev', 'noexec'];
      if (m.ReadOnly) opts.push('ro');
      if (m.TmpfsOptions?.SizeBytes) opts.push(`size=${m.TmpfsOptions.SizeBytes}`);
      if (m.TmpfsOptions?.Mode) opts.push(`mode=${m.TmpfsOptions.Mode.toString(8)}`);
      out.push({ destination: m.Target ?? '', type: 'tmpfs', source: 'tmpfs', options: opts });
    }
  }
  for (const [dest, options] of Object.entries(hc.Tmpfs ?? {})) {
    const opts = ['nosuid', 'nodev', 'noexec', ...(options ? options.split(',').filter(Boolean) : [])];
    out.push({ destination: dest, type: 'tmpfs', source: 'tmpfs', options: opts });
  }
  return out;
}

/** Create missing bind sources (dockerd does for -v host paths). */
async function ensureBindSources(c: Container): Promise<void> {
  for (const b of c.hostConfig.Binds ?? []) {
    const p = parseBind(b);
    if (p.kind === 'bind' && !existsSync(p.source)) await mkdir(p.source, { recursive: true });
  }
  for (const m of c.hostConfig.Mounts ?? []) {
    if (m.Type === 'bind' && m.Source && m.BindOptions?.CreateMountpoint && !existsSync(m.Source)) {
      await mkdir(m.Source, { recursive: true });
    }
  }
}

/** Spec input and start options for a container whose rootfs is mounted at `rootfs`. */
export async function prepareStart(
  ix: Internals,
  c: Container,
  rootfs: string,
  buildSpec: SpecBuilder,
): Promise<Omit<StartOptions, 'beforeStart'>> {
  const rec = c.record;
  const hc = c.hostConfig;
  const dir = ix.store.dir(c.id);
  const nm = hc.NetworkMode ?? 'default';
  let netns: string | undefined;
  let hostsPath = join(dir, 'hosts');
  let hostnamePath = join(dir, 'hostname');
  let resolvConfPath = join(dir, 'resolv.conf');
  const disabled = rec.Config.NetworkDisabled === true;
  if (disabled) {
    // dockerd: a namespace of its own with loopback only, only /etc/hostname of the engine's
    hostsPath = '';
    resolvConfPath = '';
  } else if (nm === 'host') netns = 'host';
  else if (nm.startsWith('container:')) {
    const ref = nm.slice('container:'.length);
    netns = nsPathOf(ix, ref, 'net', 'network');
    const other = get(ix, ref);
    // As dockerd: the container takes the hostname of the one whose network it joins.
    rec.Config.Hostname = other.record.Config.Hostname ?? '';
    rec.Config.Domainname = other.record.Config.Domainname ?? '';
    hostsPath = other.record.HostsPath;
    hostnamePath = other.record.HostnamePath;
    resolvConfPath = other.record.ResolvConfPath;
  }
  // the default bridge: links checked, the namespace and its CNI plumbing under way
  const net = beginStartNetwork(ix, c);
  if (net.netns) netns = net.netns;
  if (disabled || !nm.startsWith('container:')) {
    await writeContainerFiles({
      hostsPath,
      hostnamePath,
      resolvConfPath,
      hostname: rec.Config.Hostname ?? c.id.slice(0, 12),
      domainname: rec.Config.Domainname,
      hostConfig: hc,
      hostNetwork: nm === 'host' && !disabled,
      links: net.linkHosts,
      hostGateway: ix.network?.bridge?.gateway,
    });
  }
  rec.HostsPath = hostsPath;
  rec.HostnamePath = hostnamePath;
  rec.ResolvConfPath = resolvConfPath;

  const joinNamespaces: SpecInput['joinNamespaces'] = {};
  if (hc.PidMode === 'host') joinNamespaces.pid = 'host';
  else if (hc.PidMode?.startsWith('container:')) {
    joinNamespaces.pid = nsPathOf(ix, hc.PidMode.slice(10), 'pid', 'PID namespace');
  }
  if (hc.IpcMode === 'host') joinNamespaces.ipc = 'host';
  else if (hc.IpcMode?.startsWith('container:')) {
    joinNamespaces.ipc = nsPathOf(ix, hc.IpcMode.slice(10), 'ipc', 'IPC namespace');
  }
  if (hc.UTSMode === 'host') joinNamespaces.uts = 'host';

  await ensureBindSources(c);
  const config: ContainerConfig = { ...rec.Config };
  if (net.linkEnv.length) config.Env = mergeLinkEnv(net.linkEnv, rec.Config.Env ?? []);
  if (config.Entrypoint?.length === 1 && config.Entrypoint[0] === '') config.Entrypoint = [];
  const parent = hc.CgroupParent ? hc.CgroupParent.replace(/\/+$/, '') : '/berth';
  const input: SpecInput = {
    id: c.id,
    rootfs,
    config,
    // NetworkDisabled: a new network namespace whatever the mode says
    hostConfig: disabled ? { ...hc, NetworkMode: 'none' } : hc,
    hostsPath,
    hostnamePath,
    resolvConfPath,
    cgroupsPath: `${parent.startsWith('/') ? parent : `/${parent}`}/${c.id}`,
    mounts: [...bindMounts(c), ...(await volumeSpecMounts(ix, c, rootfs))],
    joinNamespaces,
  };
  if (netns !== undefined) input.netns = netns;
  const spec = await buildSpec(input);
  await startNetworkReady(c);
  const cs = hc.ConsoleSize;
  const opts: Omit<StartOptions, 'beforeStart'> = {
    id: c.id,
    bundleDir: bundlePath(ix, c.id),
    spec,
    terminal: rec.Config.Tty === true,
    stdin: rec.Config.OpenStdin === true,
    stdinOnce: rec.Config.StdinOnce === true,
  };
  if (writesLog(c)) {
    // conmon writes there; the engine copies it into the container's log (logging.ts)
    opts.logPath = ix.runtime.monitorLogPath(c.id);
    const cap = monitorLogSizeMax(logLimits(c));
    if (cap) opts.logSizeMax = cap;
  }
  if (cs && cs[0] > 0 && cs[1] > 0) opts.consoleSize = { height: cs[0], width: cs[1] };
  return opts;
}

/**
 * Exit code and message of a failed start, as dockerd's translateContainerdStartErr decides: 127
 * when the message names the command as not found, 126 when it was refused (permission denied),
 * 127 for a mount of a file onto a directory or the other way (with dockerd's hint); those are
 * the user's errors (400). Anything else (a volume that would not mount, the runtime failing)
 * is 128 and the engine's.
 */
export function startFailure(
  err: unknown,
  cmd: string,
): { exitCode: number; message: string; userError: boolean } {
  let message = errorMessage(err);
  const lower = message.toLowerCase();
  const runtime = lower.includes('oci runtime');
  if (
    runtime &&
    cmd !== '' &&
    lower.includes(cmd.toLowerCase()) &&
    /executable file not found|no such file or directory/.test(lower)
  ) {
    return { exitCode: 127, message, userError: true };
  }
  if (runtime && lower.includes('permission denied')) return { exitCode: 126, message, userError: true };
  if (runtime && lower.includes('not a directory')) {
    message +=
      ': Are you trying to mount a directory onto a file (or vice-versa)? Check if the specified host path exists and is the expected type';
    return { exitCode: 127, message, userError: true };
  }
  return { exitCode: 128, message, userError: false };
}

export async function fileSize(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch {
    return 0;
  }
}
