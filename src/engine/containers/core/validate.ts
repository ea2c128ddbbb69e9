import { isIP } from 'node:net';
import type { ContainerConfig, HostConfig } from '../../../common/docker-types.js';
import { invalidParameter } from '../../../common/errors.js';
import { userGoRegExp } from '../../../common/go-regexp.js';
import { goParseBool } from '../../../common/go-strconv.js';
import { parseSignal } from '../../../common/signals.js';
import { parseLogLimits } from '../../runtime/index.js';
import { hostSysInfo, type SysInfo } from '../../runtime/sysinfo.js';
import { checkMountPoints, checkMounts } from './mounts.validate.js';
import type { NetworkingConfig } from './record.types.js';
import { checkResources, type HostValidation } from './resources.validate.js';

/**
 * Create-time validation of Config, HostConfig and NetworkingConfig, with dockerd's messages
 * (resources in resources.validate.ts, mounts in mounts.validate.ts).
 */

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
  // the runtime's period is a uint64: dockerd lets a negative one through to fail in runc (a 500)
  if (period < 0) throw invalidParameter('invalid CPU real-time period: must not be negative');
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
  for (const k of ['labels-regex', 'env-regex']) if (cfg[k]) userGoRegExp(cfg[k]);
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

/** dockerd's parseSecurityOpt (what the runtime takes at start: label, apparmor, seccomp...). */
function checkSecurityOpt(opts: string[] | null | undefined): void {
  for (const opt of opts ?? []) {
    if (opt === 'no-new-privileges' || opt === 'disable') continue;
    const sep = opt.includes('=') ? '=' : opt.includes(':') ? ':' : '';
    if (!sep) throw invalidParameter(`invalid --security-opt 1: "${opt}"`);
    const key = opt.slice(0, opt.indexOf(sep));
    const value = opt.slice(opt.indexOf(sep) + 1);
    if (key === 'no-new-privileges' && goParseBool(value) === undefined) {
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
    kernelMemory: options.kernelMemory,
    sysInfo,
    swapSupported: options.swapSupported ?? sysInfo.swapLimit,
    runtimes: options.runtimes ?? KNOWN_RUNTIMES,
    update: options.update ?? false,
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
  if (!opts.update) checkStorageOpt(hc.StorageOpt);
  return warnings;
}

/**
 * HostConfig.StorageOpt, as dockerd's overlay2 takes it where the backing filesystem has no
 * project quotas (berth's snapshots never have them): `size` is refused with overlay2's words,
 * any other option is unknown. dockerd answers these with 500 after making nothing; berth, 400.
 */
function checkStorageOpt(opts: Record<string, string> | null | undefined): void {
  const keys = Object.keys(opts ?? {}).sort((a, b) =>
    a === 'size' ? -1 : b === 'size' ? 1 : a < b ? -1 : 1,
  );
  for (const key of keys) {
    if (key.toLowerCase() === 'size') {
      throw invalidParameter(
        "--storage-opt is supported only for overlay over xfs with 'pquota' mount option",
      );
    }
    throw invalidParameter(`Unknown option ${key.toLowerCase()}`);
  }
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

/**
 * NetworkingConfig at create. berth's networks are all predefined (bridge, host, none), where
 * dockerd refuses (at start; berth at create, so that nothing is left behind) what only
 * user-defined networks take: a chosen address and network-scoped aliases; and a container is on
 * one network only.
 */
/** The option of an endpoint's DriverOpts that sets its interface's sysctls (API 1.46). */
export const ENDPOINT_SYSCTLS = 'com.docker.network.endpoint.sysctls';

/** `net.X.Y.IFNAME.Z=V` settings of an endpoint's DriverOpts, each as given. */
export function endpointSysctlList(opts: Record<string, string> | null | undefined): string[] {
  const value = opts?.[ENDPOINT_SYSCTLS];
  return value ? value.split(',') : [];
}

export function validateNetworkingConfig(nc: NetworkingConfig): void {
  for (const [net, ep] of Object.entries(nc.EndpointsConfig ?? {})) {
    if (!ep) throw invalidParameter(`no EndpointSettings for ${net}`);
    // API 1.44 moved --mac-address here; the bridge plugin would fail on a bad one at start
    if (ep.MacAddress && !/^([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}$/.test(ep.MacAddress)) {
      throw invalidParameter(`invalid MAC address: ${ep.MacAddress}`);
    }
    for (const sysctl of endpointSysctlList(ep.DriverOpts)) {
      const part = sysctl.split('.');
      if (
        part.length < 5 ||
        !['ipv4', 'ipv6', 'mpls'].includes(part[1] ?? '') ||
        !/^(IFNAME|ifname)$/.test(part[3] ?? '')
      ) {
        throw invalidParameter(
          `invalid endpoint settings:\nunrecognised network interface sysctl '${sysctl}'; represent 'net.X.Y.ethN.Z=V' as 'net.X.Y.IFNAME.Z=V', 'X' must be 'ipv4', 'ipv6' or 'mpls'`,
        );
      }
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
    // static addresses and aliases: checked against the networks (net/endpoints.ts)
  }
}
