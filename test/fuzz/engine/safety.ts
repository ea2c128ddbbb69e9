import type { HostConfig, MountSpec } from '../../../src/common/docker-types.js';
import { decodeCreateRequest } from '../../../src/engine/api/containers.create.js';
import { decodeUpdateJson } from '../../../src/engine/api/schema/containers.schema.js';
import { decodeExecCreateJson } from '../../../src/engine/api/schema/exec.schema.js';
import { decodeVolumeCreateJson } from '../../../src/engine/api/schema/volumes.schema.js';

/**
 * The engine fuzzer runs as root against a real engine: bodies that would reach outside the
 * engine's own directories are never sent. Each body is read exactly as the engine reads it
 * (JSON.parse of the trimmed text, then the engine's own decoders, legacy top-level HostConfig
 * fields and case-insensitive keys included), and refused by shape if the engine would then
 * bind-mount a host path, run privileged, share a host namespace, reach host devices, leave the
 * container's cgroup, unmask /proc, mount a device through a volume, and the like. A body the
 * engine cannot decode is safe: it is refused before anything is made. `undefined` means safe;
 * otherwise the reason.
 */

/** The body as the engine parses it (readJson: trimmed UTF-8, JSON.parse); undefined: refused. */
function parsed(body: Buffer): unknown {
  const text = body.toString('utf8').trim();
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const HOST_NAMESPACE_FIELDS = [
  'NetworkMode',
  'PidMode',
  'IpcMode',
  'UTSMode',
  'UsernsMode',
  'CgroupnsMode',
] as const;

/** Local volume driver options that mount something other than a fresh tmpfs. */
export function volumeOptionsProblem(opts: Record<string, string> | null | undefined): string | undefined {
  if (!opts) return undefined;
  const has = (k: string) => Object.hasOwn(opts, k);
  if (!has('type') && !has('device') && !has('o')) return undefined;
  const o = opts.o ?? '';
  if (opts.type === 'tmpfs' && opts.device === 'tmpfs' && !/bind|remount|move|x-/i.test(o)) return undefined;
  return `volume driver options mount a device (${JSON.stringify(opts).slice(0, 100)})`;
}

function bindProblem(spec: string): string | undefined {
  if (typeof spec !== 'string') return undefined;
  const colon = spec.indexOf(':');
  if (colon < 0) return undefined; // an anonymous volume at that path
  const source = spec.slice(0, colon);
  if (/^[/.~\\]/.test(source) || source.includes('/')) return `a bind of a host path (${spec.slice(0, 100)})`;
  return undefined;
}

function mountProblem(m: MountSpec | null | undefined): string | undefined {
  if (!m || typeof m !== 'object') return undefined;
  const type = String(m.Type ?? '')
    .trim()
    .toLowerCase();
  if (type !== '' && type !== 'volume' && type !== 'tmpfs' && type !== 'image')
    return `a mount of type ${JSON.stringify(m.Type)}`;
  if (typeof m.Source === 'string' && /[/\\~]|^\./.test(m.Source))
    return `a mount of source ${m.Source.slice(0, 100)}`;
  return volumeOptionsProblem(m.VolumeOptions?.DriverConfig?.Options ?? undefined);
}

function nonEmpty(v: unknown): boolean {
  if (v === undefined || v === null || v === '' || v === false) return false;
  if (Array.isArray(v)) return v.length > 0;
  if (isObject(v)) return Object.keys(v).length > 0;
  return true;
}

/** What in a (decoded) HostConfig reaches the host. */
export function hostConfigProblem(hc: HostConfig): string | undefined {
  if (hc.Privileged === true) return 'privileged';
  for (const f of HOST_NAMESPACE_FIELDS) {
    const v = hc[f];
    if (typeof v === 'string' && v.trim().toLowerCase() === 'host') return `${f} host`;
  }
  for (const f of [
    'CapAdd',
    'Devices',
    'DeviceCgroupRules',
    'DeviceRequests',
    'SecurityOpt',
    'Sysctls',
  ] as const)
    if (nonEmpty(hc[f])) return `${f} set`;
  for (const f of ['CgroupParent', 'Cgroup', 'Runtime', 'ContainerIDFile'] as const)
    if (nonEmpty(hc[f])) return `${f} set`;
  // an empty list unmasks /proc paths (and makes /proc/sys writable)
  if (hc.MaskedPaths !== undefined && hc.MaskedPaths !== null) return 'MaskedPaths set';
  if (hc.ReadonlyPaths !== undefined && hc.ReadonlyPaths !== null) return 'ReadonlyPaths set';
  if (typeof hc.OomScoreAdj === 'number' && hc.OomScoreAdj < 0) return 'a negative OomScoreAdj';
  for (const b of hc.Binds ?? []) {
    const why = bindProblem(b);
    if (why) return why;
  }
  for (const m of hc.Mounts ?? []) {
    const why = mountProblem(m);
    if (why) return why;
  }
  return undefined;
}

/**
 * A create body that could reach the host, or block a stop for long (a stop timeout above a
 * few seconds, health checks every few milliseconds).
 */
export function createBodyProblem(body: Buffer, version: string): string | undefined {
  const value = parsed(body);
  if (!isObject(value)) return undefined;
  let decoded: ReturnType<typeof decodeCreateRequest>;
  try {
    decoded = decodeCreateRequest(value, version);
  } catch {
    return undefined;
  }
  const why = hostConfigProblem(decoded.hostConfig);
  if (why) return why;
  for (const ep of Object.values(decoded.networkingConfig.EndpointsConfig ?? {})) {
    if (isObject(ep) && isObject(ep.DriverOpts) && Object.keys(ep.DriverOpts).some((k) => /sysctl/i.test(k)))
      return 'endpoint sysctls';
  }
  const stop = decoded.config.StopTimeout;
  if (typeof stop === 'number' && (stop < 0 || stop > 2)) return `StopTimeout ${stop}`;
  const hc = decoded.config.Healthcheck;
  if (isObject(hc)) {
    for (const f of ['Interval', 'Timeout', 'StartPeriod', 'StartInterval'] as const) {
      const v = hc[f];
      if (typeof v === 'number' && v > 0 && v < 10e9) return `Healthcheck.${f} ${v}`;
    }
  }
  return undefined;
}

export function execBodyProblem(body: Buffer): string | undefined {
  const value = parsed(body);
  if (!isObject(value)) return undefined;
  try {
    return decodeExecCreateJson(value).Privileged === true ? 'a privileged exec' : undefined;
  } catch {
    return undefined;
  }
}

export function updateBodyProblem(body: Buffer): string | undefined {
  const value = parsed(body);
  if (!isObject(value)) return undefined;
  try {
    return hostConfigProblem(decodeUpdateJson(value));
  } catch {
    return undefined;
  }
}

export function volumeBodyProblem(body: Buffer): string | undefined {
  const value = parsed(body);
  try {
    return volumeOptionsProblem(decodeVolumeCreateJson(value).DriverOpts);
  } catch {
    return undefined;
  }
}

/**
 * Whether an image reference names a registry other than this machine's loopback (its first
 * component holds a `.` or a `:`, or is `localhost`, and is not a loopback host): the engine would
 * look it up and connect to it. Fuzzing talks to loopback only, so such requests are never sent.
 * `docker.io` names need no network here (no mirror: a clear error).
 */
export function remoteRegistryProblem(reference: string | undefined): string | undefined {
  if (!reference) return undefined;
  const slash = reference.indexOf('/');
  if (slash < 0) return undefined;
  const domain = reference.slice(0, slash).toLowerCase();
  if (!/[.:]/.test(domain) && domain !== 'localhost') return undefined;
  if (domain === 'docker.io' || domain === 'index.docker.io') return undefined;
  const host = domain.startsWith('[') ? domain.slice(0, domain.indexOf(']') + 1) : domain.split(':')[0];
  if (host === 'localhost' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host ?? '')) return undefined;
  return `a registry off this machine (${domain})`;
}
