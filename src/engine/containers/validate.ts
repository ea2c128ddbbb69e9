import { existsSync } from 'node:fs';
import { isIP } from 'node:net';
import { cpus } from 'node:os';
import { isAbsolute, posix } from 'node:path';
import type { ContainerConfig, HostConfig, MountSpec } from '../../common/docker-types.js';
import { invalidParameter } from '../../common/errors.js';
import { parseLogLimits } from '../runtime/index.js';
import { goRegExp } from './logging.js';
import { parseSignal } from './signals.js';
import type { NetworkingConfig } from './types.js';

/** Create-time validation of Config, HostConfig and NetworkingConfig, with dockerd's messages. */

const MIN_MEMORY = 6 * 1024 * 1024;
const MIN_KERNEL_MEMORY = 4 * 1024 * 1024;
const MIN_DURATION_NS = 1_000_000;
const HOSTNAME =
  /^(([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])\.)*([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])$/;

export const LOG_DRIVERS = ['json-file', 'local', 'none'] as const;
const LOG_OPTS: Record<string, string[]> = {
  'json-file': [
    'max-size',
    'max-file',
    'labels',
    'labels-regex',
    'env',
    'env-regex',
    'tag',
    'compress',
    'mode',
    'max-buffer-size',
  ],
  local: ['max-size', 'max-file', 'compress', 'mode', 'max-buffer-size'],
  none: [],
};

const CAPABILITIES = new Set([
  'CHOWN',
  'DAC_OVERRIDE',
  'DAC_READ_SEARCH',
  'FOWNER',
  'FSETID',
  'KILL',
  'SETGID',
  'SETUID',
  'SETPCAP',
  'LINUX_IMMUTABLE',
  'NET_BIND_SERVICE',
  'NET_BROADCAST',
  'NET_ADMIN',
  'NET_RAW',
  'IPC_LOCK',
  'IPC_OWNER',
  'SYS_MODULE',
  'SYS_RAWIO',
  'SYS_CHROOT',
  'SYS_PTRACE',
  'SYS_PACCT',
  'SYS_ADMIN',
  'SYS_BOOT',
  'SYS_NICE',
  'SYS_RESOURCE',
  'SYS_TIME',
  'SYS_TTY_CONFIG',
  'MKNOD',
  'LEASE',
  'AUDIT_WRITE',
  'AUDIT_CONTROL',
  'SETFCAP',
  'MAC_OVERRIDE',
  'MAC_ADMIN',
  'SYSLOG',
  'WAKE_ALARM',
  'BLOCK_SUSPEND',
  'AUDIT_READ',
  'PERFMON',
  'BPF',
  'CHECKPOINT_RESTORE',
]);

export function validateHostname(hostname: string | undefined): void {
  if (!hostname) return;
  if (hostname.length > 255 || !HOSTNAME.test(hostname)) {
    throw invalidParameter(`invalid hostname format: ${hostname}`);
  }
}

function checkDuration(value: number | undefined, what: string): void {
  if (value === undefined || value === null) return;
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw invalidParameter(`${what} in Healthcheck must be a number of nanoseconds`);
  }
  if (value !== 0 && value < MIN_DURATION_NS) {
    throw invalidParameter(`${what} in Healthcheck cannot be less than 1ms`);
  }
}

export function validateConfig(config: ContainerConfig): void {
  validateHostname(config.Hostname);
  if (config.WorkingDir && !config.WorkingDir.startsWith('/')) {
    throw invalidParameter(
      `the working directory '${config.WorkingDir}' is invalid, it needs to be an absolute path`,
    );
  }
  for (const e of config.Env ?? []) {
    if (typeof e !== 'string' || e === '' || e.startsWith('=')) {
      throw invalidParameter(`invalid environment variable: ${String(e)}`);
    }
  }
  const hc = config.Healthcheck;
  if (hc) {
    checkDuration(hc.Interval, 'Interval');
    checkDuration(hc.Timeout, 'Timeout');
    checkDuration(hc.StartPeriod, 'StartPeriod');
    checkDuration(hc.StartInterval, 'StartInterval');
    if (hc.Retries !== undefined && hc.Retries < 0) {
      throw invalidParameter('Retries in Healthcheck cannot be negative');
    }
  }
  for (const port of Object.keys(config.ExposedPorts ?? {})) parsePortKey(port);
  if (config.StopSignal) parseSignal(config.StopSignal);
  if (
    config.StopTimeout !== undefined &&
    config.StopTimeout !== null &&
    !Number.isInteger(config.StopTimeout)
  ) {
    throw invalidParameter('StopTimeout must be an integer number of seconds');
  }
  if (config.MacAddress && !/^([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}$/.test(config.MacAddress)) {
    throw invalidParameter(`invalid MAC address: ${config.MacAddress}`);
  }
}

/** `80`, `80/tcp`, `8000-8010/udp`: returns the port range and protocol. */
export function parsePortKey(key: string): { start: number; end: number; proto: string } {
  const slash = key.indexOf('/');
  const portStr = slash < 0 ? key : key.slice(0, slash);
  const proto = slash < 0 ? 'tcp' : key.slice(slash + 1).toLowerCase();
  if (!['tcp', 'udp', 'sctp'].includes(proto)) {
    throw invalidParameter(`invalid port specification: "${key}": invalid protocol "${proto}"`);
  }
  const range = parsePortRange(portStr);
  if (!range) throw invalidParameter(`invalid port specification: "${portStr}"`);
  return { ...range, proto };
}

function parsePortRange(s: string): { start: number; end: number } | undefined {
  const m = /^(\d+)(?:-(\d+))?$/.exec(s);
  if (!m) return undefined;
  const start = Number(m[1]);
  const end = m[2] === undefined ? start : Number(m[2]);
  if (start < 0 || start > 65535 || end < start || end > 65535) return undefined;
  return { start, end };
}

function checkRestartPolicy(hc: HostConfig): void {
  const rp = hc.RestartPolicy ?? {};
  const name = rp.Name ?? '';
  const count = rp.MaximumRetryCount ?? 0;
  switch (name) {
    case '':
    case 'no':
    case 'always':
    case 'unless-stopped':
      if (count !== 0) {
        throw invalidParameter(
          "invalid restart policy: maximum retry count can only be used with 'on-failure'",
        );
      }
      break;
    case 'on-failure':
      if (count < 0) throw invalidParameter('invalid restart policy: maximum retry count cannot be negative');
      break;
    default:
      throw invalidParameter(
        `invalid restart policy: unknown policy '${name}'; use one of 'no', 'always', 'on-failure', or 'unless-stopped'`,
      );
  }
  if (hc.AutoRemove && name !== '' && name !== 'no') {
    throw invalidParameter("can't create 'AutoRemove' container with restart policy");
  }
}

function checkResources(
  hc: HostConfig,
  apiKernelMemory: boolean,
  warnings: string[],
  swapSupported: boolean,
): void {
  const mem = hc.Memory ?? 0;
  const swap = hc.MemorySwap ?? 0;
  if (mem < 0) throw invalidParameter('invalid memory limit: must not be negative');
  if (mem > 0 && mem < MIN_MEMORY) throw invalidParameter('Minimum memory limit allowed is 6MB');
  if (mem > 0 && swap > 0 && swap < mem) {
    throw invalidParameter('Minimum memoryswap limit should be larger than memory limit, see usage');
  }
  if (mem === 0 && swap > 0) {
    throw invalidParameter('You should always set the Memory limit when using Memoryswap limit, see usage');
  }
  if (swap < -1) throw invalidParameter('invalid memory swap limit: use -1 for unlimited');
  if (mem > 0 && swap !== -1 && !swapSupported) {
    warnings.push(
      'Your kernel does not support swap limit capabilities or the cgroup is not mounted. Memory limited without swap.',
    );
  }
  const swappiness = hc.MemorySwappiness;
  if (
    swappiness !== undefined &&
    swappiness !== null &&
    swappiness !== -1 &&
    (swappiness < 0 || swappiness > 100)
  ) {
    throw invalidParameter(`Invalid value: ${swappiness}, valid memory swappiness range is 0-100`);
  }
  const res = hc.MemoryReservation ?? 0;
  if (mem > 0 && res > 0 && mem < res) {
    throw invalidParameter('Minimum memory limit can not be less than memory reservation limit, see usage');
  }
  if (res > 0 && res < MIN_MEMORY) throw invalidParameter('Minimum memory reservation allowed is 6MB');
  if (apiKernelMemory && (hc.KernelMemory ?? 0) > 0 && (hc.KernelMemory ?? 0) < MIN_KERNEL_MEMORY) {
    throw invalidParameter('Minimum kernel memory limit allowed is 4MB');
  }
  if ((hc.ShmSize ?? 0) < 0) throw invalidParameter('SHM size can not be less than 0');
  const oom = hc.OomScoreAdj ?? 0;
  if (oom < -1000 || oom > 1000) {
    throw invalidParameter(`Invalid value ${oom}, range for oom score adj is [-1000, 1000]`);
  }
  const blkio = hc.BlkioWeight ?? 0;
  if (blkio > 0 && (blkio < 10 || blkio > 1000))
    throw invalidParameter('Range of blkio weight is from 10 to 1000');
  if ((hc.CpuShares ?? 0) < 0) throw invalidParameter('invalid CPU shares: must not be negative');
  const nano = hc.NanoCpus ?? 0;
  if (nano > 0 && ((hc.CpuPeriod ?? 0) > 0 || (hc.CpuQuota ?? 0) > 0)) {
    throw invalidParameter('Conflicting options: Nano CPUs and CPU Period cannot both be set');
  }
  const ncpu = cpus().length;
  if (nano < 0 || nano > ncpu * 1e9) {
    throw invalidParameter(
      `Range of CPUs is from 0.01 to ${ncpu}.00, as there are only ${ncpu} CPUs available`,
    );
  }
  const period = hc.CpuPeriod ?? 0;
  if (period !== 0 && (period < 1000 || period > 1_000_000)) {
    throw invalidParameter(
      'CPU cfs period can not be less than 1ms (i.e. 1000) or larger than 1s (i.e. 1000000)',
    );
  }
  const quota = hc.CpuQuota ?? 0;
  if (quota > 0 && quota < 1000) throw invalidParameter('CPU cfs quota can not be less than 1ms (i.e. 1000)');
  if (hc.CpusetCpus && !/^\d+(-\d+)?(,\d+(-\d+)?)*$/.test(hc.CpusetCpus)) {
    throw invalidParameter(`Invalid value ${hc.CpusetCpus} for cpuset cpus`);
  }
  if (hc.CpusetMems && !/^\d+(-\d+)?(,\d+(-\d+)?)*$/.test(hc.CpusetMems)) {
    throw invalidParameter(`Invalid value ${hc.CpusetMems} for cpuset mems`);
  }
  for (const u of hc.Ulimits ?? []) {
    if (!u || typeof u.Name !== 'string' || u.Soft > u.Hard) {
      throw invalidParameter(`invalid ulimit: ${JSON.stringify(u)}: soft limit must not exceed hard limit`);
    }
  }
}

function checkLogConfig(hc: HostConfig): void {
  const type = hc.LogConfig?.Type || 'json-file';
  const allowed = LOG_OPTS[type];
  if (!allowed) {
    throw invalidParameter(`error looking up logging plugin ${type}: plugin "${type}" not found`);
  }
  const cfg = hc.LogConfig?.Config ?? {};
  for (const [k, v] of Object.entries(cfg)) {
    if (!allowed.includes(k)) throw invalidParameter(`unknown log opt '${k}' for ${type} log driver`);
    if (typeof v !== 'string') throw invalidParameter(`log opt '${k}' must be a string`);
  }
  const mode = cfg.mode ?? '';
  if (mode !== '' && mode !== 'blocking' && mode !== 'non-blocking') {
    throw invalidParameter(`logger: logging mode not supported: ${mode}`);
  }
  if (cfg['max-buffer-size'] !== undefined && mode !== 'non-blocking') {
    throw invalidParameter("logger: max-buffer-size option is only supported with 'mode=non-blocking'");
  }
  // what dockerd's driver refuses when the container starts, refused at create
  parseLogLimits(hc.LogConfig);
  for (const k of ['labels-regex', 'env-regex']) if (cfg[k]) goRegExp(cfg[k]);
}

/**
 * `host-src:container-dest[:mode]` / `volume:container-dest[:mode]` / `container-dest` (an
 * anonymous volume: kind `volume`, source '').
 */
export interface ParsedBind {
  source: string;
  destination: string;
  readOnly: boolean;
  mode: string;
  propagation: string;
  kind: 'bind' | 'volume';
}

const BIND_MODES = new Set([
  'ro',
  'rw',
  'z',
  'Z',
  'nocopy',
  'private',
  'rprivate',
  'shared',
  'rshared',
  'slave',
  'rslave',
  'consistent',
  'cached',
  'delegated',
]);

export function parseBind(spec: string): ParsedBind {
  const bad = (why: string) => invalidParameter(`invalid volume specification: '${spec}': ${why}`);
  const parts = spec.split(':');
  if (parts.length === 1 && isAbsolute(spec)) {
    if (posix.normalize(spec) === '/') throw bad("invalid mount config: destination can't be '/'");
    return { source: '', destination: spec, readOnly: false, mode: '', propagation: '', kind: 'volume' };
  }
  if (parts.length < 2 || parts.length > 3 || parts.some((p, i) => p === '' && i < 2)) {
    throw bad('expected host-src:container-dest[:mode]');
  }
  const [source = '', destination = '', mode = ''] = parts;
  if (!isAbsolute(destination)) {
    throw bad(
      `invalid mount config for type "bind": invalid mount path: '${destination}' mount path must be absolute`,
    );
  }
  if (destination === '/') throw bad("invalid mount config: destination can't be '/'");
  const modes = mode === '' ? [] : mode.split(',');
  for (const m of modes) if (!BIND_MODES.has(m)) throw bad(`invalid mode: ${m}`);
  const propagation = modes.find((m) => /^r?(private|shared|slave)$/.test(m)) ?? '';
  const kind = source.startsWith('/') ? 'bind' : 'volume';
  if (kind === 'volume' && !/^[a-zA-Z0-9][a-zA-Z0-9_.-]+$/.test(source)) {
    throw bad(
      `"${source}" includes invalid characters for a local volume name, only "[a-zA-Z0-9][a-zA-Z0-9_.-]" are allowed. If you intended to pass a host directory, use absolute path`,
    );
  }
  return { source, destination, readOnly: modes.includes('ro'), mode, propagation, kind };
}

function checkMounts(mounts: MountSpec[]): void {
  const seen = new Set<string>();
  for (const m of mounts) {
    if (!m || typeof m !== 'object') throw invalidParameter('invalid mount config: expected an object');
    const what = `invalid mount config for type "${m.Type ?? ''}"`;
    if (m.Target !== undefined && typeof m.Target !== 'string')
      throw invalidParameter(`${what}: Target must be a string`);
    if (m.Source !== undefined && typeof m.Source !== 'string')
      throw invalidParameter(`${what}: Source must be a string`);
    if (!m.Target) throw invalidParameter(`${what}: field Target must not be empty`);
    if (!isAbsolute(m.Target))
      throw invalidParameter(`${what}: invalid mount path: '${m.Target}' mount path must be absolute`);
    if (seen.has(m.Target)) throw invalidParameter(`Duplicate mount point: ${m.Target}`);
    seen.add(m.Target);
    switch (m.Type) {
      case 'bind':
        if (m.VolumeOptions) throw invalidParameter(`${what}: field VolumeOptions must not be specified`);
        if (m.TmpfsOptions) throw invalidParameter(`${what}: field TmpfsOptions must not be specified`);
        if (!m.Source) throw invalidParameter(`${what}: field Source must not be empty`);
        if (!isAbsolute(m.Source))
          throw invalidParameter(`${what}: invalid mount path: '${m.Source}' mount path must be absolute`);
        if (!existsSync(m.Source) && !m.BindOptions?.CreateMountpoint) {
          throw invalidParameter(`${what}: bind source path does not exist: ${m.Source}`);
        }
        break;
      case 'tmpfs':
        if (m.Source) throw invalidParameter(`${what}: field Source must not be specified`);
        if (m.BindOptions) throw invalidParameter(`${what}: field BindOptions must not be specified`);
        if (m.VolumeOptions) throw invalidParameter(`${what}: field VolumeOptions must not be specified`);
        break;
      case 'volume':
        if (m.BindOptions) throw invalidParameter(`${what}: field BindOptions must not be specified`);
        if (m.TmpfsOptions) throw invalidParameter(`${what}: field TmpfsOptions must not be specified`);
        if (!m.Source && m.ReadOnly) {
          throw invalidParameter(`${what}: must not set ReadOnly mode when using anonymous volumes`);
        }
        if (m.Source && !/^[a-zA-Z0-9][a-zA-Z0-9_.-]+$/.test(m.Source)) {
          throw invalidParameter(
            `${what}: invalid volume name: "${m.Source}" includes invalid characters for a local volume name, only "[a-zA-Z0-9][a-zA-Z0-9_.-]" are allowed`,
          );
        }
        break;
      default:
        throw invalidParameter(`mount type unknown: ${JSON.stringify(m.Type ?? '')}`);
    }
  }
}

function checkCaps(list: string[] | null | undefined, field: string): void {
  for (const c of list ?? []) {
    const name = String(c).toUpperCase().replace(/^CAP_/, '');
    if (name !== 'ALL' && !CAPABILITIES.has(name)) {
      throw invalidParameter(`invalid ${field}: unknown capability: "CAP_${name}"`);
    }
  }
}

function checkNamespaceMode(value: string | undefined, field: string, allowed: string[]): void {
  if (!value) return;
  if (allowed.includes(value)) return;
  if (value.startsWith('container:') && value.length > 'container:'.length) return;
  throw invalidParameter(`invalid ${field}: ${value}`);
}

export interface HostValidation {
  apiKernelMemory: boolean;
  swapSupported: boolean;
}

/** Validate HostConfig; returns warnings. */
export function validateHostConfig(hc: HostConfig, config: ContainerConfig, opts: HostValidation): string[] {
  const warnings: string[] = [];
  checkRestartPolicy(hc);
  checkResources(hc, opts.apiKernelMemory, warnings, opts.swapSupported);
  checkLogConfig(hc);
  for (const b of hc.Binds ?? []) {
    if (typeof b !== 'string') throw invalidParameter('invalid volume specification: binds must be strings');
    parseBind(b);
  }
  checkMounts(hc.Mounts ?? []);
  for (const [dest] of Object.entries(hc.Tmpfs ?? {})) {
    if (!isAbsolute(dest))
      throw invalidParameter(`invalid tmpfs mount path: '${dest}' mount path must be absolute`);
  }
  for (const [port, bindings] of Object.entries(hc.PortBindings ?? {})) {
    parsePortKey(port);
    if (bindings !== null && !Array.isArray(bindings)) {
      throw invalidParameter(`invalid port bindings for ${port}: expected an array of {HostIp, HostPort}`);
    }
    for (const pb of bindings ?? []) {
      if (!pb || typeof pb !== 'object') throw invalidParameter(`invalid port binding for ${port}`);
      if (pb?.HostPort && !parsePortRange(pb.HostPort)) {
        throw invalidParameter(`invalid port specification: "${pb.HostPort}"`);
      }
      if (pb?.HostIp && isIP(pb.HostIp) === 0) throw invalidParameter(`invalid IP address: ${pb.HostIp}`);
    }
  }
  checkCaps(hc.CapAdd, 'CapAdd');
  checkCaps(hc.CapDrop, 'CapDrop');
  for (const h of hc.ExtraHosts ?? []) {
    const i = h.indexOf(':');
    const host = i < 0 ? '' : h.slice(0, i);
    const ip = i < 0 ? '' : h.slice(i + 1).replace(/^\[|\]$/g, '');
    if (!host || (ip !== 'host-gateway' && isIP(ip) === 0)) {
      throw invalidParameter(`invalid IP address in add-host: "${ip}"`);
    }
  }
  for (const d of hc.Dns ?? []) {
    if (isIP(d) === 0) throw invalidParameter(`${d} is not an ip address`);
  }
  checkNamespaceMode(hc.PidMode, 'PID mode', ['host', '']);
  checkNamespaceMode(hc.IpcMode, 'IPC mode', ['host', 'private', 'shareable', 'none', '']);
  if (hc.UTSMode && hc.UTSMode !== 'host') throw invalidParameter(`invalid UTS mode: ${hc.UTSMode}`);
  if (hc.UsernsMode && hc.UsernsMode !== 'host')
    throw invalidParameter(`invalid USER mode: ${hc.UsernsMode}`);
  if (hc.CgroupnsMode && !['host', 'private'].includes(hc.CgroupnsMode)) {
    throw invalidParameter(`invalid cgroup namespace mode: ${hc.CgroupnsMode}`);
  }
  const nm = hc.NetworkMode ?? '';
  if (nm === 'host' && config.Hostname) {
    // dockerd accepts this and keeps the host's hostname; nothing to refuse.
  }
  if (nm.startsWith('container:')) {
    if (config.Hostname) throw invalidParameter('conflicting options: hostname and the network mode');
    if ((hc.Links ?? []).length > 0) {
      throw invalidParameter(
        "conflicting options: container type network can't be used with links. This would result in undefined behavior",
      );
    }
    if (Object.keys(hc.PortBindings ?? {}).length > 0 || hc.PublishAllPorts) {
      throw invalidParameter('conflicting options: port publishing and the container type network mode');
    }
    if ((hc.Dns ?? []).length > 0) throw invalidParameter('conflicting options: dns and the network mode');
    if ((hc.ExtraHosts ?? []).length > 0) {
      throw invalidParameter('conflicting options: custom host-to-IP mapping and the network mode');
    }
  }
  if (nm === 'host' && (hc.Links ?? []).length > 0) {
    throw invalidParameter(
      "conflicting options: host type networking can't be used with links. This would result in undefined behavior",
    );
  }
  if (nm === 'host' && Object.keys(hc.PortBindings ?? {}).length > 0) {
    warnings.push('Published ports are discarded when using host network mode');
  } else if (
    (Object.keys(hc.PortBindings ?? {}).length > 0 || hc.PublishAllPorts) &&
    !nm.startsWith('container:') &&
    nm !== 'none'
  ) {
    warnings.push('Port publishing is not available yet: published ports are not bound');
  }
  const cs = hc.ConsoleSize;
  if (cs !== undefined && cs !== null) {
    if (!Array.isArray(cs) || cs.length !== 2 || cs.some((n) => !Number.isInteger(n) || n < 0)) {
      throw invalidParameter('ConsoleSize must be [height, width] of non-negative integers');
    }
  }
  return warnings;
}

export function validateNetworkingConfig(nc: NetworkingConfig): void {
  for (const [net, ep] of Object.entries(nc.EndpointsConfig ?? {})) {
    // API 1.44 moved --mac-address here; the bridge plugin would fail on a bad one at start
    if (ep?.MacAddress && !/^([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}$/.test(ep.MacAddress)) {
      throw invalidParameter(`invalid MAC address: ${ep.MacAddress}`);
    }
    const ipam = ep?.IPAMConfig;
    if (!ipam) continue;
    if (ipam.IPv4Address && isIP(ipam.IPv4Address) !== 4) {
      throw invalidParameter(`invalid IPv4 address: ${ipam.IPv4Address}`);
    }
    if (ipam.IPv6Address && isIP(ipam.IPv6Address) !== 6) {
      throw invalidParameter(`invalid IPv6 address: ${ipam.IPv6Address}`);
    }
    for (const ip of ipam.LinkLocalIPs ?? []) {
      if (isIP(ip) === 0) throw invalidParameter(`invalid link-local IP address: ${ip} (network ${net})`);
    }
  }
}
