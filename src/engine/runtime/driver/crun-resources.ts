import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { OciResources } from '../oci/spec.types.js';
import { controllerDirs } from './stats.js';

/**
 * runc refuses CPU shares the kernel clamps (cgroup v1: 2..262144), with these words; crun writes
 * them and the kernel clamps them. The same refusal for crun, as dockerd (with runc) answers.
 */
export function cpuSharesRefusal(resources: OciResources | undefined): string | null {
  const shares = resources?.cpu?.shares;
  if (shares === undefined || shares === 0) return null;
  if (shares > 262144) return 'the maximum allowed cpu-shares is 262144';
  if (shares < 2) return 'the minimum allowed cpu-shares is 2';
  return null;
}

/**
 * Resources as crun 1.8 takes them: without a negative CFS quota (unlimited; the kernel reads any
 * negative quota so). crun writes it as an unsigned number, which the kernel refuses (ERANGE): a
 * new cgroup has no quota anyway, and an update removes it with removeCpuQuota().
 */
export function resourcesForCrun(resources: OciResources): OciResources {
  const cpu = resources.cpu;
  if (cpu?.quota === undefined || cpu.quota >= 0) return resources;
  const { quota: _unlimited, ...rest } = cpu;
  return { ...resources, cpu: rest };
}

/** A running container's CFS quota removed (unlimited), as runc's update writes it. */
export async function removeCpuQuota(cgroupsPath: string): Promise<void> {
  const dirs = await controllerDirs(cgroupsPath.startsWith('/') ? cgroupsPath : `/${cgroupsPath}`);
  if (dirs.v2) {
    const file = join(dirs.v2, 'cpu.max');
    const period = (await readFile(file, 'utf8')).trim().split(/\s+/)[1] ?? '100000';
    await writeFile(file, `max ${period}`);
  } else {
    await writeFile(join(dirs.v1('cpu'), 'cpu.cfs_quota_us'), '-1');
  }
}
