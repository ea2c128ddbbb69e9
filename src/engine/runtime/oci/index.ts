import { randomBytes } from 'node:crypto';
import { posix } from 'node:path';
import type { HostConfig } from '../../../common/docker-types.js';
import { invalidParameter } from '../../../common/errors.js';
import { goJsonText, U64_MAX_TEXT } from '../../../common/go-json-text.js';
import { goParseBool } from '../../../common/go-strconv.js';
import type { SpecInput, SpecMount } from '../runtime.types.js';
import { capabilitySets, tweakCapabilities } from './capabilities.js';
import { planDevices } from './devices.js';
import { realSpecHost, type SpecHost } from './host.js';
import { defaultMaskedPaths, defaultReadonlyPaths, planMounts } from './mounts.js';
import { planNamespaces, validateSysctls } from './namespaces.js';
import { containerEnv } from './process-env.js';
import { planResources } from './resources.js';
import { planRlimits } from './rlimits.js';
import { mkdirInRoot } from './rootfs-path.js';
import {
  parseSeccompProfile,
  type SeccompProfile,
  seccompForContainer,
  sharedSeccompForContainer,
} from './seccomp.js';
import { defaultSeccompProfile } from './seccomp-default.js';
import type { OciLinux, OciProcess, OciResources, OciSeccomp, OciSpec } from './spec.types.js';
import { resolveUserInRootfs } from './user.js';

export interface BuildSpecOptions {
  /** Host facts (limits, capabilities, devices...); the real machine by default. */
  host?: SpecHost;
  /** Collects warnings for the create response (ulimits lowered, swap limit unsupported...). */
  warnings?: string[];
  /**
   * The daemon's seccomp profile (dockerd's --seccomp-profile): Docker's default when undefined,
   * 'unconfined' for none. A container's SecurityOpt `seccomp=` overrides it.
   */
  seccompProfile?: 'unconfined' | SeccompProfile;
}

/** The in-container path of docker-init for HostConfig.Init. */
export const initPathInContainer = '/sbin/docker-init';

interface SecurityOptions {
  noNewPrivileges: boolean;
  /** undefined: the default profile; 'unconfined': none; else a profile's JSON. */
  seccomp?: string;
}

function parseSecurityOpt(opts: readonly string[] | null | undefined): SecurityOptions {
  const out: SecurityOptions = { noNewPrivileges: false };
  for (const opt of opts ?? []) {
    if (opt === 'no-new-privileges') {
      out.noNewPrivileges = true;
      continue;
    }
    if (opt === 'disable') continue;
    const sep = opt.includes('=') ? '=' : opt.includes(':') ? ':' : '';
    if (!sep) throw invalidParameter(`invalid --security-opt 1: "${opt}"`);
    const key = opt.slice(0, opt.indexOf(sep));
    const value = opt.slice(opt.indexOf(sep) + 1);
    switch (key) {
      case 'no-new-privileges':
        {
          const b = goParseBool(value);
          if (b === undefined) throw invalidParameter(`invalid --security-opt 2: "${opt}"`);
          out.noNewPrivileges = b;
        }
        break;
      case 'seccomp':
        out.seccomp = value;
        break;
      case 'label':
      case 'apparmor':
      case 'systempaths':
        // no SELinux or AppArmor on this host
        break;
      default:
        throw invalidParameter(`invalid --security-opt 2: "${opt}"`);
    }
  }
  return out;
}

/**
 * The OCI runtime spec (config.json) of a container, as dockerd 20.10 generates it. Creates the
 * working directory in the rootfs when it is missing.
 */
export async function buildSpec(input: SpecInput, options: BuildSpecOptions = {}): Promise<OciSpec> {
  const host = options.host ?? realSpecHost;
  const warnings = options.warnings ?? [];
  const cfg = input.config;
  const hc = input.hostConfig;

  const args = [...(cfg.Entrypoint ?? []), ...(cfg.Cmd ?? [])];
  if (args.length === 0) throw invalidParameter('No command specified');

  let cwd = cfg.WorkingDir ? posix.normalize(cfg.WorkingDir) : '/';
  if (!cwd.startsWith('/')) {
    throw invalidParameter(
      `the working directory '${cfg.WorkingDir}' is invalid, it needs to be an absolute path`,
    );
  }
  if (cwd.length > 1 && cwd.endsWith('/')) cwd = cwd.slice(0, -1);

  const plan = planNamespaces(input);
  const security = parseSecurityOpt(hc.SecurityOpt);

  const [user, limits, bound] = await Promise.all([
    resolveUserInRootfs(input.rootfs, cfg.User ?? '', hc.GroupAdd ?? []),
    host.processLimits(),
    host.capabilityBound(),
  ]);
  if (cfg.WorkingDir) {
    try {
      await mkdirInRoot(input.rootfs, cwd);
    } catch (err) {
      throw invalidParameter(err instanceof Error ? err.message : String(err));
    }
  }

  const caps = tweakCapabilities(hc.CapAdd, hc.CapDrop, hc.Privileged === true, bound);
  const rlimits = planRlimits(hc.Ulimits, limits, warnings);

  const sysctl: Record<string, string> = {};
  if (cfg.Domainname) sysctl['kernel.domainname'] = cfg.Domainname;
  const networkMode = (hc.NetworkMode ?? '').trim();
  if (!plan.hostNetwork && !networkMode.startsWith('container:')) {
    if (await host.sysctlExists('net.ipv4.ping_group_range'))
      sysctl['net.ipv4.ping_group_range'] = '0 2147483647';
    if (await host.sysctlExists('net.ipv4.ip_unprivileged_port_start')) {
      sysctl['net.ipv4.ip_unprivileged_port_start'] = '0';
    }
    // no IPv6 on berth's networks: as dockerd does for a network without IPv6, the container's
    // namespace has it off (no ::1, no link-local addresses); --sysctl can turn it back on
    if (await host.sysctlExists('net.ipv6.conf.all.disable_ipv6')) {
      sysctl['net.ipv6.conf.all.disable_ipv6'] = '1';
      sysctl['net.ipv6.conf.default.disable_ipv6'] = '1';
    }
  }
  validateSysctls(hc.Sysctls ?? {}, plan);
  Object.assign(sysctl, hc.Sysctls ?? {});
  if (sysctl['kernel.domainname'] !== undefined && plan.hostUts) delete sysctl['kernel.domainname'];

  const mountPlan = planMounts(input);
  const mounts: SpecMount[] = mountPlan.mounts;
  let processArgs = args;
  if (hc.Init === true && !plan.hostPid && !input.joinNamespaces?.pid) {
    const initPath = await host.initPath();
    if (!initPath) throw invalidParameter('docker-init binary not found on the host: cannot run with --init');
    processArgs = [initPathInContainer, '--', ...args];
    mounts.push({
      destination: initPathInContainer,
      type: 'bind',
      source: initPath,
      options: ['bind', 'ro'],
    });
  }

  const { devices, rules } = await planDevices(hc, host);
  let seccomp: OciSeccomp | null = null;
  const daemonProfile = options.seccompProfile ?? defaultSeccompProfile;
  if (!hc.Privileged) {
    if (security.seccomp === undefined || security.seccomp === '') {
      if (daemonProfile !== 'unconfined') seccomp = sharedSeccompForContainer(daemonProfile, caps);
    } else if (security.seccomp === 'builtin') {
      seccomp = sharedSeccompForContainer(defaultSeccompProfile, caps);
    } else if (security.seccomp !== 'unconfined') {
      seccomp = seccompForContainer(parseSeccompProfile(security.seccomp), caps);
    }
  }

  const resources = await planResources(hc, rules, host, warnings);

  const hostname = plan.hostUts ? '' : (cfg.Hostname ?? '');
  const process: OciProcess = {
    terminal: cfg.Tty === true,
    user: { uid: user.uid, gid: user.gid, additionalGids: user.additionalGids },
    args: processArgs,
    env: containerEnv(cfg.Env, cfg.Hostname ?? '', cfg.Tty === true),
    cwd,
    capabilities: capabilitySets(caps, user.uid),
    rlimits,
    noNewPrivileges: security.noNewPrivileges,
    oomScoreAdj: hc.OomScoreAdj ?? 0,
  };
  if (cfg.Tty && hc.ConsoleSize && hc.ConsoleSize[0] > 0 && hc.ConsoleSize[1] > 0) {
    process.consoleSize = { height: hc.ConsoleSize[0], width: hc.ConsoleSize[1] };
  }

  const linux: OciLinux = {
    sysctl,
    resources,
    cgroupsPath: input.cgroupsPath,
    namespaces: plan.namespaces,
    devices,
    maskedPaths: hc.MaskedPaths ?? (hc.Privileged ? [] : [...defaultMaskedPaths]),
    readonlyPaths: hc.ReadonlyPaths ?? (hc.Privileged ? [] : [...defaultReadonlyPaths]),
  };
  if (mountPlan.rootfsPropagation) linux.rootfsPropagation = mountPlan.rootfsPropagation;
  if (seccomp) linux.seccomp = seccomp;

  const spec: OciSpec = {
    ociVersion: '1.0.2-dev',
    process,
    root: { path: input.rootfs, readonly: hc.ReadonlyRootfs === true },
    hostname,
    mounts,
    linux,
  };
  return spec;
}

/**
 * linux.resources for `runtime update` (docker update): memory, CPU, pids, blkio of a HostConfig,
 * as buildSpec makes them, without the device rules.
 */
export async function buildResources(
  hostConfig: HostConfig,
  options: Pick<BuildSpecOptions, 'host' | 'warnings'> = {},
): Promise<OciResources> {
  const res = await planResources(hostConfig, [], options.host ?? realSpecHost, options.warnings ?? []);
  delete res.devices;
  return res;
}

/**
 * Serialize a spec for config.json (or resources for `runtime update`): rlimits of -1 become
 * RLIM_INFINITY (a uint64 JSON can't hold), integers beyond 2^53 their Go text (goJsonText).
 */
const rlimitText = (key: string, value: unknown): string | undefined =>
  (key === 'soft' || key === 'hard') && value === -1 ? U64_MAX_TEXT : undefined;

/** The JSON text of a shared seccomp section (sharedSeccompForContainer), made once. */
const seccompTexts = new WeakMap<OciSeccomp, string>();
const SECCOMP_SLOT = `__seccomp_${randomBytes(8).toString('hex')}__`;

export function specToJson(spec: OciSpec | OciProcess | OciResources): string {
  const linux = 'linux' in spec ? spec.linux : undefined;
  const seccomp = linux?.seccomp;
  if (!linux || !seccomp) return goJsonText(spec, rlimitText);
  // Docker's default profile is most of a spec's text (~700 values through the replacer): its
  // text is made once per shared section and put in its place
  let text = seccompTexts.get(seccomp);
  if (text === undefined) {
    text = goJsonText(seccomp, rlimitText);
    seccompTexts.set(seccomp, text);
  }
  const withSlot = { ...spec, linux: { ...linux, seccomp: SECCOMP_SLOT as unknown as OciSeccomp } };
  const seccompText = text;
  return goJsonText(withSlot, rlimitText).replace(`"${SECCOMP_SLOT}"`, () => seccompText);
}

export type { SpecHost } from './host.js';
export { realSpecHost } from './host.js';
export type { SeccompProfile } from './seccomp.js';
export type * from './spec.types.js';
