import type { HealthConfig } from '../../../common/docker-types.js';
import { invalidParameter } from '../../../common/errors.js';
import { parseNormalizedNamed } from '../../../common/reference.js';
import { rpcInvalid } from '../secrets/validate.js';
import { parseConstraints } from './constraints.js';
import type { ContainerSpec, ServiceSpec, UpdateConfig } from './service.types.js';

/**
 * swarmkit's checks of a ServiceSpec (manager/controlapi/service.go), in its words as dockerd
 * passes them on (`rpc error: code = InvalidArgument desc = …`). The spec is the normalized one
 * (service-spec.ts): Name, Mode, TaskTemplate.ContainerSpec are there.
 */

/** swarmkit's isValidDNSName: letters and digits, `-` and `_` inside. */
const DNS_NAME = /^[a-zA-Z0-9](?:[-_]*[A-Za-z0-9]+)*$/;
const MIN_DURATION = 1_000_000; // 1 ms

function checkName(name: string): void {
  if (!DNS_NAME.test(name)) throw rpcInvalid('name must be valid as a DNS name component');
  if (name.length > 63) throw rpcInvalid('name must be 63 characters or fewer');
}

function checkResources(r: { NanoCPUs?: number; MemoryBytes?: number } | undefined): void {
  if (!r) return;
  if (r.NanoCPUs && r.NanoCPUs < 1e6) {
    throw rpcInvalid(`invalid cpu value ${goFloat(r.NanoCPUs / 1e9)}: Must be at least 0.001`);
  }
  if (r.MemoryBytes && r.MemoryBytes < 4 * 1024 * 1024) {
    throw rpcInvalid(`invalid memory value ${r.MemoryBytes}: Must be at least 4MiB`);
  }
}

/** Go's %g for the small values above (5e-09, 0.0005). */
function goFloat(v: number): string {
  const exp = Math.floor(Math.log10(Math.abs(v)));
  if (exp < -4) {
    const [mant, e] = v.toExponential().split('e');
    const n = Number(e);
    return `${mant}e${n < 0 ? '-' : '+'}${String(Math.abs(n)).padStart(2, '0')}`;
  }
  return String(v);
}

function checkHealth(h: HealthConfig | undefined): void {
  if (!h) return;
  for (const f of ['Interval', 'Timeout', 'StartPeriod'] as const) {
    const v = h[f];
    if (v !== undefined && v !== 0 && v < MIN_DURATION) {
      throw rpcInvalid(`ContainerSpec: ${f} in HealthConfig cannot be less than 1ms`);
    }
  }
  if ((h.Retries ?? 0) < 0) throw rpcInvalid('ContainerSpec: Retries in HealthConfig cannot be negative');
}

function checkContainer(c: ContainerSpec): void {
  if (!c.Image) throw rpcInvalid('ContainerSpec: image reference must be provided');
  try {
    parseNormalizedNamed(c.Image);
  } catch {
    throw rpcInvalid(`ContainerSpec: ${JSON.stringify(c.Image)} is not a valid repository/tag`);
  }
  const targets = new Set<string>();
  for (const m of c.Mounts ?? []) {
    const target = m.Target ?? '';
    if (targets.has(target)) throw rpcInvalid(`ContainerSpec: duplicate mount point: ${target}`);
    targets.add(target);
  }
  checkHealth(c.Healthcheck);
}

function checkSecretRefs(c: ContainerSpec): void {
  const targets = new Map<string, string>();
  for (const ref of c.Secrets ?? []) {
    if (!ref.SecretName || !ref.SecretID) throw rpcInvalid('malformed secret reference');
    if (!ref.File) throw rpcInvalid('malformed secret reference, no target provided');
    const file = ref.File.Name ?? '';
    if (file === '') throw rpcInvalid('malformed file secret reference, invalid target file name provided');
    const prev = targets.get(file);
    if (prev !== undefined) {
      throw rpcInvalid(
        `secret references '${prev}' and '${ref.SecretName}' have a conflicting target: '${file}'`,
      );
    }
    targets.set(file, ref.SecretName);
  }
}

function checkConfigRefs(c: ContainerSpec): void {
  const targets = new Map<string, string>();
  for (const ref of c.Configs ?? []) {
    if (!ref.ConfigName || !ref.ConfigID) throw rpcInvalid('malformed config reference');
    if (ref.File) {
      const file = ref.File.Name ?? '';
      if (file === '') throw rpcInvalid('malformed file config reference, invalid target file name provided');
      const prev = targets.get(file);
      if (prev !== undefined) {
        throw rpcInvalid(
          `config references '${prev}' and '${ref.ConfigName}' have a conflicting target: '${file}'`,
        );
      }
      targets.set(file, ref.ConfigName);
    } else if (!ref.Runtime) {
      throw rpcInvalid('malformed config reference, no target provided');
    }
  }
}

function checkUpdate(u: UpdateConfig | undefined, rollback: boolean): void {
  if (!u) return;
  if ((u.Delay ?? 0) < 0) throw rpcInvalid('TaskSpec: update-delay cannot be negative');
  if ((u.Monitor ?? 0) < 0) throw rpcInvalid('TaskSpec: update-monitor cannot be negative');
  const ratio = u.MaxFailureRatio ?? 0;
  if (ratio < 0 || ratio > 1) {
    throw rpcInvalid('TaskSpec: update-maxfailureratio cannot be less than 0 or bigger than 1');
  }
  // a rollback that fails cannot roll back in turn (the CLI offers only pause and continue)
  if (rollback && u.FailureAction === 'rollback') {
    throw rpcInvalid('RollbackConfig: FailureAction rollback is not allowed, only pause or continue');
  }
}

function checkEndpoint(spec: ServiceSpec): void {
  const e = spec.EndpointSpec;
  if (!e?.Ports) return;
  if (e.Mode === 'dnsrr' && e.Ports.some((p) => p.PublishMode === 'ingress')) {
    throw rpcInvalid("EndpointSpec: port published with ingress mode can't be used with dnsrr mode");
  }
  const seen = new Set<string>();
  for (const p of e.Ports) {
    if (p.PublishMode === 'host' || !p.PublishedPort) continue;
    const key = `${p.PublishedPort}/${p.Protocol}`;
    if (seen.has(key)) throw rpcInvalid('EndpointSpec: duplicate published ports provided');
    seen.add(key);
  }
}

export function validateServiceSpec(spec: ServiceSpec): void {
  checkName(spec.Name ?? '');
  const task = spec.TaskTemplate ?? {};
  checkResources(task.Resources?.Limits);
  checkResources(task.Resources?.Reservations);
  if ((task.RestartPolicy?.Delay ?? 0) < 0) throw rpcInvalid('TaskSpec: restart-delay cannot be negative');
  if ((task.RestartPolicy?.Window ?? 0) < 0) throw rpcInvalid('TaskSpec: restart-window cannot be negative');
  try {
    parseConstraints(task.Placement?.Constraints ?? []);
  } catch (err) {
    throw invalidParameter(`rpc error: code = Unknown desc = ${(err as Error).message}`);
  }
  const c = task.ContainerSpec ?? {};
  checkSecretRefs(c);
  checkConfigRefs(c);
  checkContainer(c);
  checkEndpoint(spec);
  if ((spec.Mode?.ReplicatedJob || spec.Mode?.GlobalJob) && spec.UpdateConfig) {
    throw rpcInvalid('Jobs may not have an update config');
  }
  checkUpdate(spec.UpdateConfig, false);
  checkUpdate(spec.RollbackConfig, true);
}
