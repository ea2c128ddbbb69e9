import { join, posix } from 'node:path';
import { lstat, readFile, stat, writeFile } from '../../../common/fs/quick.js';
import { mkdirInRoot, resolveInRoot } from '../oci/rootfs-path.js';
import type { OciMount, OciResources, OciSpec } from '../oci/spec.types.js';
import { controllerDirs } from './stats.js';

/*
 * Where crun 1.8 reads a spec otherwise than runc (what dockerd runs, so what clients expect), the
 * spec or the answer made to read as runc reads it.
 */

/** Mount flags and their opposites: runc applies a mount's options in order, the last one wins. */
const opposites = new Map<string, string>();
for (const [a, b] of [
  ['exec', 'noexec'],
  ['suid', 'nosuid'],
  ['dev', 'nodev'],
  ['rw', 'ro'],
  ['atime', 'noatime'],
  ['diratime', 'nodiratime'],
  ['relatime', 'norelatime'],
  ['strictatime', 'nostrictatime'],
] as const) {
  opposites.set(a, b);
  opposites.set(b, a);
}

/**
 * Mount options as runc reads them: of a flag and its opposite only the last given stays (crun
 * keeps `noexec` when `exec` follows it: a tmpfs Mount with the `exec` option would stay noexec).
 */
export function mountsForCrun(mounts: OciMount[]): OciMount[] {
  return mounts.map((m) => {
    const options = m.options;
    if (!options?.some((o, i) => options.indexOf(opposites.get(o) ?? '', i + 1) > i)) return m;
    const kept = options.filter((o, i) => {
      const other = opposites.get(o);
      return other === undefined || !options.slice(i + 1).some((later) => later === o || later === other);
    });
    return { ...m, options: kept };
  });
}

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

/**
 * Binds of a file as runc makes them, for crun 1.8: `rro` (recursive read-only) left out (a file
 * has no submounts; crun fails on it with "open mount target: Not a directory", `ro` stays), and a
 * missing target made an empty file in the rootfs (mode 0755, as runc makes it). Anything
 * unexpected is left for the runtime to report.
 */
export async function fileBindsForCrun(spec: OciSpec): Promise<OciMount[]> {
  const root = spec.root.path;
  const out: OciMount[] = [];
  for (const m of spec.mounts) {
    const isBind = m.type === 'bind' || m.options.includes('bind') || m.options.includes('rbind');
    const isFile =
      isBind &&
      (await stat(m.source).then(
        (st) => st.isFile(),
        () => false,
      ));
    if (!isFile) {
      out.push(m);
      continue;
    }
    out.push(m.options.includes('rro') ? { ...m, options: m.options.filter((o) => o !== 'rro') } : m);
    try {
      const exists = await lstat(await resolveInRoot(root, m.destination)).then(
        () => true,
        () => false,
      );
      if (exists) continue;
      await mkdirInRoot(root, posix.dirname(posix.normalize(`/${m.destination}`)));
      await writeFile(await resolveInRoot(root, m.destination), '', { flag: 'wx', mode: 0o755 });
    } catch {
      // the runtime says what is wrong
    }
  }
  return out;
}
