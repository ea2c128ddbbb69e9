import type { HostConfig } from '../../../common/docker-types.js';
import { BerthError, errorMessage, isKind } from '../../../common/errors.js';
import { buildResources } from '../../runtime/index.js';
import type { ResourceDriver } from '../../runtime/runtime.types.js';
import type { Container } from './container.js';
import type { ContainerEvents } from './events.js';
import { runtimeRefusedLimit } from './start-failure.js';
import type { ContainerStore } from './store.js';
import { validateHostConfig } from './validate.js';

export interface UpdateDeps {
  runtime: ResourceDriver;
  store: ContainerStore;
  events: ContainerEvents;
}

/** dockerd's errCannotUpdate: the container's ID, then why. */
function cannotUpdate(c: Container, why: string, kind: 'InvalidParameter' | 'System'): Error {
  return new BerthError(kind, `Cannot update container ${c.id}: ${why}`);
}

/**
 * Merge an update into the container's HostConfig as dockerd's UpdateContainer does: CPU quota
 * and period cannot be mixed with NanoCpus across updates, a zero leaves a value as it is, a
 * memory limit above an existing swap limit needs the swap limit too, and AutoRemove containers
 * keep their restart policy. Returns the new HostConfig (the old one is untouched).
 */
export function mergeUpdate(c: Container, cur: HostConfig, u: HostConfig): HostConfig {
  const conflict = (why: string) => cannotUpdate(c, why, 'InvalidParameter');
  const nano = u.NanoCpus ?? 0;
  if (nano > 0 && (cur.CpuPeriod ?? 0) > 0)
    throw conflict('Conflicting options: Nano CPUs cannot be updated as CPU Period has already been set');
  if (nano > 0 && (cur.CpuQuota ?? 0) > 0)
    throw conflict('Conflicting options: Nano CPUs cannot be updated as CPU Quota has already been set');
  if ((u.CpuPeriod ?? 0) > 0 && (cur.NanoCpus ?? 0) > 0)
    throw conflict('Conflicting options: CPU Period cannot be updated as NanoCPUs has already been set');
  if ((u.CpuQuota ?? 0) > 0 && (cur.NanoCpus ?? 0) > 0)
    throw conflict('Conflicting options: CPU Quota cannot be updated as NanoCPUs has already been set');
  const next: HostConfig = { ...cur };
  for (const f of [
    'BlkioWeight',
    'CpuShares',
    'NanoCpus',
    'CpuPeriod',
    'CpuQuota',
    'MemoryReservation',
    'KernelMemory',
    'CpuRealtimePeriod',
    'CpuRealtimeRuntime',
  ] as const) {
    const v = u[f];
    if (v) next[f] = v;
  }
  if (u.CpusetCpus) next.CpusetCpus = u.CpusetCpus;
  if (u.CpusetMems) next.CpusetMems = u.CpusetMems;
  const mem = u.Memory ?? 0;
  if (mem !== 0) {
    // dockerd 20.10 refuses this against an unset swap limit too (a bug later fixed): only a
    // swap limit that is set and would end below the memory limit is a conflict here
    const swap = cur.MemorySwap ?? 0;
    if (swap > 0 && mem > swap && !u.MemorySwap) {
      throw conflict(
        'Memory limit should be smaller than already set memoryswap limit, update the memoryswap at the same time',
      );
    }
    next.Memory = mem;
  }
  if (u.MemorySwap) next.MemorySwap = u.MemorySwap;
  if (u.PidsLimit !== undefined && u.PidsLimit !== null) next.PidsLimit = u.PidsLimit;
  // the device limits (API 1.55): a list replaces the container's, [] clears it, none keeps it
  const given = <T>(v: T | null | undefined, before: T | null | undefined) =>
    v === undefined || v === null ? before : v;
  next.BlkioWeightDevice = given(u.BlkioWeightDevice, cur.BlkioWeightDevice);
  next.BlkioDeviceReadBps = given(u.BlkioDeviceReadBps, cur.BlkioDeviceReadBps);
  next.BlkioDeviceWriteBps = given(u.BlkioDeviceWriteBps, cur.BlkioDeviceWriteBps);
  next.BlkioDeviceReadIOps = given(u.BlkioDeviceReadIOps, cur.BlkioDeviceReadIOps);
  next.BlkioDeviceWriteIOps = given(u.BlkioDeviceWriteIOps, cur.BlkioDeviceWriteIOps);
  const policy = u.RestartPolicy;
  if (policy?.Name) {
    if (cur.AutoRemove && policy.Name !== 'no') {
      throw conflict('Restart policy cannot be updated because AutoRemove is enabled for the container');
    }
    next.RestartPolicy = { Name: policy.Name, MaximumRetryCount: policy.MaximumRetryCount ?? 0 };
  }
  return next;
}

/**
 * docker update: validate the settings as dockerd does (its create checks in update mode, with
 * its warnings), merge them, apply them to the running container's cgroups (`runtime update`),
 * keep them (a stopped container gets them at its next start), emit `update`.
 */
export async function updateContainer(
  d: UpdateDeps,
  c: Container,
  u: HostConfig,
  opts: { kernelMemory: boolean },
): Promise<string[]> {
  const warnings = validateHostConfig(u, {}, { kernelMemory: opts.kernelMemory, update: true });
  return c.lock.run(async () => {
    const before = c.hostConfig;
    const next = mergeUpdate(c, before, u);
    if (c.isRunningProcess) {
      try {
        await d.runtime.update(c.id, await buildResources(next));
      } catch (err) {
        // the spec's refusals (conflicting options) and the runtime's are the request's fault
        const why = errorMessage(err);
        const bad = isKind(err, 'InvalidParameter') || runtimeRefusedLimit(why);
        throw cannotUpdate(c, why, bad ? 'InvalidParameter' : 'System');
      }
    }
    c.hostConfig = next;
    c.restart.policy = next.RestartPolicy ?? {};
    try {
      await d.store.persist(c, true);
    } catch (err) {
      c.hostConfig = before;
      c.restart.policy = before.RestartPolicy ?? {};
      throw err;
    }
    d.events.emit(c, 'update');
    return warnings;
  });
}
