import { existsSync } from 'node:fs';
import { isIP } from 'node:net';
import { cpus } from 'node:os';
import { isAbsolute, posix } from 'node:path';
import type { ContainerConfig, HostConfig, MountSpec } from '../../common/docker-types.js';
import { invalidParameter } from '../../common/errors.js';
import { parseLogLimits } from '../runtime/index.js';
import { hostSysInfo, type SysInfo } from '../system/sysinfo.js';
import { goRegExp } from './logging.js';
import { parseSignal } from './signals.js';
import type { NetworkingConfig } from './types.js';

/** Create-time validation of Config, HostConfig and NetworkingConfig, with dockerd's messages. */

const MIN_MEMORY = 6 * 1024 * 1024;
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
  const name: string = rp.Name ?? '';
  const count = rp.MaximumRetryCount ?? 0;
  // dockerd 20.10's words; an unnamed policy with a count is refused as current dockerd does
  switch (name) {
    case '':
      if (count !== 0) {
        throw invalidParameter(
          "invalid restart policy: maximum retry count can only be used with 'on-failure'",
        );
      }
      break;
    case 'no':
    case 'always':
    case 'unless-stopped':
      if (count !== 0) {
        throw invalidParameter(`maximum retry count cannot be used with restart policy '${name}'`);
      }
      break;
    case 'on-failure':
      if (count < 0) throw invalidParameter('maximum retry count cannot be negative');
      break;
    default:
      throw invalidParameter(`invalid restart policy '${name}'`);
  }
}

/**
 * A cgroup list (`0-2,5`) as dockerd's parsers.ParseUintList reads it; `maximum` bounds the
 * values (0: none). Throws the message dockerd wraps.
 */
function parseUintList(value: string, maximum = 0): Set<number> {
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
function cpusetAvailable(provided: string, available: string, what: 'cpus' | 'mems'): boolean {
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
function checkResources(hc: HostConfig, opts: Required<HostValidation>, warnings: string[]): void {
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
  if (mem === 0 && swap > 0) {
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
  if (opts.apiKernelMemory && (hc.KernelMemory ?? 0) > 0) {
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
  const ncpu = cpus().length;
  if (nano < 0 || nano > ncpu * 1e9) {
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
  const lists: [keyof HostConfig, boolean, string][] = [
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
    const list = hc[field] as unknown[] | null | undefined;
    if (!list?.length) continue;
    if (!supported) {
      warnings.push(warning);
      (hc as Record<string, unknown>)[field] = [];
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

/** runconfig's validateResources: real-time scheduling. */
function checkRealtime(hc: HostConfig, si: SysInfo): void {
  const period = hc.CpuRealtimePeriod ?? 0;
  const runtime = hc.CpuRealtimeRuntime ?? 0;
  if ((period !== 0 || runtime !== 0) && !si.cpuRealtime) {
    throw invalidParameter('Your kernel does not support CPU real-time scheduler');
  }
  if (period !== 0 && runtime !== 0 && runtime > period) {
    throw invalidParameter('cpu real-time runtime cannot be higher than cpu real-time period');
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

const RW_MODES = new Set(['ro', 'rw']);
const LABEL_MODES = new Set(['z', 'Z']);
const PROPAGATIONS = new Set(['private', 'rprivate', 'shared', 'rshared', 'slave', 'rslave']);
const COPY_MODES = new Set(['nocopy']);
const CONSISTENCY_MODES = new Set(['consistent', 'cached', 'delegated']);
const MODE_KINDS = [RW_MODES, LABEL_MODES, PROPAGATIONS, COPY_MODES, CONSISTENCY_MODES];

/** Every option of `mode` known (dockerd's linuxValidMountMode without its one-of-each rule). */
function knownMode(mode: string): boolean {
  return mode === '' || mode.split(',').every((o) => MODE_KINDS.some((k) => k.has(o)));
}

/** dockerd's linuxValidMountMode: known options, at most one of each kind. */
function validMode(mode: string): boolean {
  if (!knownMode(mode)) return false;
  const opts = mode === '' ? [] : mode.split(',');
  return MODE_KINDS.every((kind) => opts.filter((o) => kind.has(o)).length <= 1);
}

/** Go's path.Clean (posix.normalize keeps a trailing slash). */
function clean(p: string): string {
  const c = posix.normalize(p);
  return c.length > 1 && c.endsWith('/') ? c.slice(0, -1) : c;
}

/** Mount target checks shared by binds and Mounts (linuxValidateNotRoot, linuxValidateAbsolute). */
function targetError(target: string): string | undefined {
  if (target === '') return 'field Target must not be empty';
  if (clean(target.replaceAll('\\', '/')) === '/') {
    return "invalid specification: destination can't be '/'";
  }
  if (!isAbsolute(target.replaceAll('\\', '/'))) {
    return `invalid mount path: '${target}' mount path must be absolute`;
  }
  return undefined;
}

/** Parse a bind as dockerd's linux ParseMountRaw does (messages included). */
export function parseBind(spec: string): ParsedBind {
  const invalidSpec = `invalid volume specification: '${spec}'`;
  const parts = spec.split(':');
  if (parts.length > 3 || parts[0] === '') throw invalidParameter(invalidSpec);
  let source = '';
  let destination: string;
  let mode = '';
  if (parts.length === 1) destination = spec;
  else {
    // `/dst:ro` is a destination and a mode: an anonymous volume cannot take a mode
    if (parts.length === 2 && knownMode(parts[1] ?? '')) throw invalidParameter(invalidSpec);
    [source = '', destination = '', mode = ''] = parts;
  }
  if (!knownMode(mode)) throw invalidParameter(`invalid mode: ${mode}`);
  const kind = source.startsWith('/') ? 'bind' : 'volume';
  const bad = targetError(destination);
  if (bad) throw invalidParameter(`${invalidSpec}: invalid mount config for type "${kind}": ${bad}`);
  if (kind === 'volume' && source !== '' && !/^[a-zA-Z0-9][a-zA-Z0-9_.-]+$/.test(source)) {
    throw invalidParameter(
      `${invalidSpec}: "${source}" includes invalid characters for a local volume name, only "[a-zA-Z0-9][a-zA-Z0-9_.-]" are allowed. If you intended to pass a host directory, use absolute path`,
    );
  }
  const modes = mode === '' ? [] : mode.split(',');
  const propagation = modes.find((m) => PROPAGATIONS.has(m)) ?? '';
  return { source, destination, readOnly: modes.includes('ro'), mode, propagation, kind };
}

/**
 * A bind given at create: parsed, plus what dockerd also refuses there but stored binds are not
 * held to (one option of each kind; `nocopy` on a bind, a propagation on a volume).
 */
function checkBind(spec: string): ParsedBind {
  const p = parseBind(spec);
  if (!validMode(p.mode)) throw invalidParameter(`invalid mode: ${p.mode}`);
  const modes = p.mode === '' ? [] : p.mode.split(',');
  const what = `invalid volume specification: '${spec}': invalid mount config for type "${p.kind}"`;
  if (p.kind === 'bind' && modes.includes('nocopy')) {
    throw invalidParameter(`${what}: field VolumeOptions must not be specified`);
  }
  if (p.kind === 'volume' && p.propagation) {
    throw invalidParameter(`${what}: field BindOptions must not be specified`);
  }
  return p;
}

/** HostConfig.Mounts as dockerd's linux validateMountConfigImpl checks them. */
function checkMounts(mounts: (MountSpec | null)[]): void {
  const seen = new Set<string>();
  for (const m of mounts) {
    if (!m || typeof m !== 'object') throw invalidParameter('invalid mount config: expected an object');
    const what = `invalid mount config for type "${m.Type ?? ''}"`;
    const target = m.Target ?? '';
    const bad = targetError(target);
    if (bad) throw invalidParameter(`${what}: ${bad}`);
    switch (m.Type) {
      case 'bind': {
        if (!m.Source) throw invalidParameter(`${what}: field Source must not be empty`);
        const prop = m.BindOptions?.Propagation;
        if (prop && !PROPAGATIONS.has(prop))
          throw invalidParameter(`${what}: invalid propagation mode: ${prop}`);
        if (m.VolumeOptions) throw invalidParameter(`${what}: field VolumeOptions must not be specified`);
        if (m.TmpfsOptions) throw invalidParameter(`${what}: field TmpfsOptions must not be specified`);
        if (!isAbsolute(m.Source))
          throw invalidParameter(`${what}: invalid mount path: '${m.Source}' mount path must be absolute`);
        if (!existsSync(m.Source) && !m.BindOptions?.CreateMountpoint) {
          throw invalidParameter(`${what}: bind source path does not exist: ${m.Source}`);
        }
        break;
      }
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
      case 'tmpfs':
        if (m.BindOptions) throw invalidParameter(`${what}: field BindOptions must not be specified`);
        if (m.Source) throw invalidParameter(`${what}: field Source must not be specified`);
        if (m.VolumeOptions) throw invalidParameter(`${what}: field VolumeOptions must not be specified`);
        break;
      default:
        throw invalidParameter(`${what}: mount type unknown`);
    }
    const dest = clean(target);
    if (seen.has(dest)) throw invalidParameter(`Duplicate mount point: ${target}`);
    seen.add(dest);
  }
}

/**
 * HostConfig.Tmpfs destinations (ValidateTmpfsMountDestination), then the duplicate mount points
 * dockerd's registerMountPoints refuses: a bind over another bind or a Tmpfs entry, a mount over
 * a bind or an earlier mount.
 */
function checkMountPoints(hc: HostConfig): void {
  const tmpfs = hc.Tmpfs ?? {};
  for (const dest of Object.keys(tmpfs)) {
    if (clean(dest.replaceAll('\\', '/')) === '/') {
      throw invalidParameter("invalid specification: destination can't be '/'");
    }
    if (!isAbsolute(dest))
      throw invalidParameter(`invalid mount path: '${dest}' mount path must be absolute`);
  }
  const taken = new Set<string>();
  for (const b of hc.Binds ?? []) {
    if (typeof b !== 'string') throw invalidParameter('invalid volume specification: binds must be strings');
    const dest = clean(checkBind(b).destination);
    if (taken.has(dest) || Object.hasOwn(tmpfs, dest))
      throw invalidParameter(`Duplicate mount point: ${dest}`);
    taken.add(dest);
  }
  for (const m of hc.Mounts ?? []) {
    const dest = clean(m?.Target ?? '');
    if (taken.has(dest)) throw invalidParameter(`Duplicate mount point: ${m?.Target ?? ''}`);
  }
}

/** dockerd's NormalizeLegacyCapabilities: `ALL`, or a known name with or without `CAP_`, any case. */
function checkCaps(list: string[] | null | undefined, field: string): void {
  for (const c of list ?? []) {
    let name = String(c).toUpperCase();
    if (name === 'ALL') continue;
    if (!name.startsWith('CAP_')) name = `CAP_${name}`;
    if (!CAPABILITIES.has(name.slice(4))) {
      throw invalidParameter(`invalid ${field}: unknown capability: "${name}"`);
    }
  }
}

const PARSE_BOOL = ['1', 't', 'T', 'true', 'TRUE', 'True', '0', 'f', 'F', 'false', 'FALSE', 'False'];

/** dockerd's parseSecurityOpt (what the runtime takes at start: label, apparmor, seccomp...). */
function checkSecurityOpt(opts: string[] | null | undefined): void {
  for (const opt of opts ?? []) {
    if (opt === 'no-new-privileges' || opt === 'disable') continue;
    const sep = opt.includes('=') ? '=' : opt.includes(':') ? ':' : '';
    if (!sep) throw invalidParameter(`invalid --security-opt 1: "${opt}"`);
    const key = opt.slice(0, opt.indexOf(sep));
    const value = opt.slice(opt.indexOf(sep) + 1);
    if (key === 'no-new-privileges' && !PARSE_BOOL.includes(value)) {
      throw invalidParameter(`invalid --security-opt 2: "${opt}"`);
    }
    if (!['label', 'apparmor', 'seccomp', 'no-new-privileges', 'systempaths'].includes(key)) {
      throw invalidParameter(`invalid --security-opt 2: "${opt}"`);
    }
  }
}

function checkNamespaceMode(value: string | undefined, field: string, allowed: string[]): void {
  if (!value) return;
  if (allowed.includes(value)) return;
  if (value.startsWith('container:') && value.length > 'container:'.length) return;
  throw invalidParameter(`invalid ${field}: ${value}`);
}

/** The runtimes the engine knows (the ones /info lists: daemon.ts). */
export const KNOWN_RUNTIMES = ['runc', 'crun'] as const;

export interface HostValidation {
  /** KernelMemory still means something at this API version (before 1.42). */
  apiKernelMemory: boolean;
  /** Swap can be limited (else the limit is discarded with dockerd's warning); default: sysInfo's. */
  swapSupported?: boolean;
  /** What the host's cgroups support; default: this host's. */
  sysInfo?: SysInfo;
  /** Runtime names HostConfig.Runtime may give; default: KNOWN_RUNTIMES. */
  runtimes?: readonly string[];
}

/**
 * Validate HostConfig (with the request's Config) as dockerd does at create, in its order, and
 * apply its discards to `hc` in place (values the kernel cannot apply: inspect shows 0). Returns
 * the warnings of the create response.
 */
export function validateHostConfig(
  hc: HostConfig,
  config: ContainerConfig,
  options: HostValidation,
): string[] {
  const sysInfo = options.sysInfo ?? hostSysInfo();
  const opts: Required<HostValidation> = {
    apiKernelMemory: options.apiKernelMemory,
    sysInfo,
    swapSupported: options.swapSupported ?? sysInfo.swapLimit,
    runtimes: options.runtimes ?? KNOWN_RUNTIMES,
  };
  const warnings: string[] = [];
  const nm = hc.NetworkMode ?? '';

  // runconfig (at decode): network mode, isolation, QoS, real-time
  checkNetworkMode(hc, config);
  const iso = hc.Isolation ?? '';
  if (iso !== '' && iso.toLowerCase() !== 'default') {
    throw invalidParameter(`Invalid isolation: "${iso}" - linux only supports 'default'`);
  }
  if ((hc.IOMaximumBandwidth ?? 0) !== 0) {
    throw invalidParameter('Invalid QoS settings: linux does not support configuration of maximum bandwidth');
  }
  if ((hc.IOMaximumIOps ?? 0) !== 0) {
    throw invalidParameter('Invalid QoS settings: linux does not support configuration of maximum IOPs');
  }
  checkRealtime(hc, sysInfo);

  // daemon validateHostConfig
  const policy = hc.RestartPolicy?.Name ?? '';
  if (hc.AutoRemove && policy !== '' && policy !== 'no') {
    throw invalidParameter("can't create 'AutoRemove' container with restart policy");
  }
  checkMounts(hc.Mounts ?? []);
  for (const h of hc.ExtraHosts ?? []) {
    const i = h.indexOf(':');
    if (i <= 0) throw invalidParameter(`bad format for add-host: "${h}"`);
    const ip = h.slice(i + 1);
    const bare = ip.trim().replace(/^\[(.*)\]$/, '$1');
    if (ip !== 'host-gateway' && isIP(bare) === 0) {
      throw invalidParameter(`invalid IP address in add-host: "${ip}"`);
    }
  }
  for (const [port, bindings] of Object.entries(hc.PortBindings ?? {})) {
    parsePortKey(port);
    for (const pb of bindings ?? []) {
      if (!pb || typeof pb !== 'object') throw invalidParameter(`invalid port binding for ${port}`);
      if (pb.HostPort && !parsePortRange(pb.HostPort)) {
        throw invalidParameter(`invalid port specification: "${pb.HostPort}"`);
      }
      if (pb.HostIp && isIP(pb.HostIp) === 0) throw invalidParameter(`invalid IP address: ${pb.HostIp}`);
    }
  }
  checkRestartPolicy(hc);
  checkCaps(hc.CapAdd, 'CapAdd');
  checkCaps(hc.CapDrop, 'CapDrop');

  // verifyPlatformContainerSettings
  checkResources(hc, opts, warnings);
  if (sysInfo.ipv4ForwardingDisabled && nm !== 'host' && nm !== 'none') {
    warnings.push('IPv4 forwarding is disabled. Networking will not work.');
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
  if (hc.Runtime && !opts.runtimes.includes(hc.Runtime)) {
    throw invalidParameter(`Unknown runtime specified ${hc.Runtime}`);
  }
  checkMountPoints(hc);
  if (hc.CgroupnsMode && !['host', 'private'].includes(hc.CgroupnsMode)) {
    throw invalidParameter(`invalid cgroup namespace mode: ${hc.CgroupnsMode}`);
  }
  if (hc.CgroupnsMode === 'private' && !sysInfo.cgroupNamespaces) {
    warnings.push('Your kernel does not support cgroup namespaces.  Cgroup namespace setting discarded.');
  }

  // create: log config, security options; berth's own checks of what would only fail at start
  checkLogConfig(hc);
  checkSecurityOpt(hc.SecurityOpt);
  for (const d of hc.Dns ?? []) {
    if (isIP(d) === 0) throw invalidParameter(`${d} is not an ip address`);
  }
  checkNamespaceMode(hc.PidMode, 'PID mode', ['host', '']);
  checkNamespaceMode(hc.IpcMode, 'IPC mode', ['host', 'private', 'shareable', 'none', '']);
  if (hc.UTSMode && hc.UTSMode !== 'host') throw invalidParameter(`invalid UTS mode: ${hc.UTSMode}`);
  if (hc.UsernsMode && hc.UsernsMode !== 'host')
    throw invalidParameter(`invalid USER mode: ${hc.UsernsMode}`);
  const cs = hc.ConsoleSize;
  if (cs !== undefined && cs !== null) {
    if (!Array.isArray(cs) || cs.length !== 2 || cs.some((n) => !Number.isInteger(n) || n < 0)) {
      throw invalidParameter('ConsoleSize must be [height, width] of non-negative integers');
    }
  }
  return warnings;
}

/** runconfig's validateNetMode / validateNetContainerMode, and berth's host-network rules. */
function checkNetworkMode(hc: HostConfig, config: ContainerConfig): void {
  const nm = hc.NetworkMode ?? '';
  const [kind, ref] = nm.split(':');
  if (kind === 'container' && !ref) {
    throw invalidParameter('Invalid network mode: invalid container format container:<name|id>');
  }
  const container = nm.startsWith('container:');
  if (container) {
    if (config.Hostname) throw invalidParameter('conflicting options: hostname and the network mode');
    if ((hc.Links ?? []).length > 0) {
      throw invalidParameter(
        "conflicting options: container type network can't be used with links. This would result in undefined behavior",
      );
    }
    if ((hc.Dns ?? []).length > 0) throw invalidParameter('conflicting options: dns and the network mode');
    if ((hc.ExtraHosts ?? []).length > 0) {
      throw invalidParameter('conflicting options: custom host-to-IP mapping and the network mode');
    }
  }
  if ((container || nm === 'host') && config.MacAddress) {
    throw invalidParameter('conflicting options: mac-address and the network mode');
  }
  if (container) {
    if (Object.keys(hc.PortBindings ?? {}).length > 0 || hc.PublishAllPorts) {
      throw invalidParameter('conflicting options: port publishing and the container type network mode');
    }
    if (Object.keys(config.ExposedPorts ?? {}).length > 0) {
      throw invalidParameter('conflicting options: port exposing and the container type network mode');
    }
  }
  if (hc.UTSMode === 'host' && config.Hostname) {
    throw invalidParameter('conflicting options: hostname and the UTS mode');
  }
  if (nm === 'host' && (hc.Links ?? []).length > 0) {
    throw invalidParameter(
      "conflicting options: host type networking can't be used with links. This would result in undefined behavior",
    );
  }
}

export function validateNetworkingConfig(nc: NetworkingConfig): void {
  for (const [net, ep] of Object.entries(nc.EndpointsConfig ?? {})) {
    if (!ep) throw invalidParameter(`no EndpointSettings for ${net}`);
    // API 1.44 moved --mac-address here; the bridge plugin would fail on a bad one at start
    if (ep.MacAddress && !/^([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}$/.test(ep.MacAddress)) {
      throw invalidParameter(`invalid MAC address: ${ep.MacAddress}`);
    }
    const ipam = ep.IPAMConfig;
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
