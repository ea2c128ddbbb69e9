import { systemError } from '../../../common/errors.js';
import { mkdir, readFile } from '../../../common/fs/quick.js';
import type { ProcessRunner } from './process.js';

/** Mounts filesystems (behind an adapter so unit tests need no root). */
export interface Mounter {
  mount(type: string, source: string, target: string, options: string): Promise<void>;
}

export function commandMounter(runner: ProcessRunner): Mounter {
  return {
    async mount(type, source, target, options) {
      await mkdir(target, { recursive: true });
      const r = await runner.run('mount', ['-t', type, '-o', options, source, target]);
      if (r.code !== 0) throw new Error(r.stderr.trim() || `mount exited with ${r.code}`);
    },
  };
}

export interface CgroupLayout {
  /** 'hybrid': v1 controllers plus cgroup2 at /sys/fs/cgroup/unified; 'v1', 'v2'. */
  mode: 'v1' | 'v2' | 'hybrid';
  /** Controllers attached to the cgroup2 hierarchy in hybrid mode. */
  v2Controllers: string[];
}

/** Read the cgroup layout from /proc/self/mountinfo-like text and the unified controllers file. */
export function parseCgroupLayout(mounts: string, unifiedControllers: string): CgroupLayout {
  let v1 = false;
  let rootV2 = false;
  let unified = false;
  for (const line of mounts.split('\n')) {
    const f = line.split(' ');
    if (f.length < 3) continue;
    const [, target, type] = f;
    if (type === 'cgroup2' && target === '/sys/fs/cgroup') rootV2 = true;
    else if (type === 'cgroup2' && target === '/sys/fs/cgroup/unified') unified = true;
    else if (type === 'cgroup') v1 = true;
  }
  if (rootV2) return { mode: 'v2', v2Controllers: [] };
  if (v1 && unified)
    return { mode: 'hybrid', v2Controllers: unifiedControllers.split(/\s+/).filter(Boolean) };
  return { mode: 'v1', v2Controllers: [] };
}

export async function readCgroupLayout(): Promise<CgroupLayout> {
  const mounts = await readFile('/proc/mounts', 'utf8');
  let controllers = '';
  try {
    controllers = await readFile('/sys/fs/cgroup/unified/cgroup.controllers', 'utf8');
  } catch {
    // no unified hierarchy
  }
  return parseCgroupLayout(mounts, controllers);
}

/**
 * crun refuses hybrid cgroups while any controller sits on the v2 hierarchy ("cgroups in hybrid
 * mode not supported, drop all controllers from cgroupv2"). Controllers that no v1 hierarchy has
 * taken (hugetlb on this kind of machine) move to v1 when mounted as cgroup v1: do that.
 */
export async function prepareHybridForCrun(
  read: () => Promise<CgroupLayout>,
  mounter: Mounter,
): Promise<string[]> {
  const layout = await read();
  if (layout.mode !== 'hybrid' || layout.v2Controllers.length === 0) return [];
  const moved: string[] = [];
  for (const c of layout.v2Controllers) {
    try {
      await mounter.mount('cgroup', 'cgroup', `/sys/fs/cgroup/${c}`, c);
      moved.push(c);
    } catch (err) {
      throw systemError(
        `crun cannot run on hybrid cgroups while the ${c} controller is on the cgroup v2 hierarchy, and mounting it as cgroup v1 at /sys/fs/cgroup/${c} failed: ${err instanceof Error ? err.message : String(err)}. Use runc, or mount the controller as v1.`,
      );
    }
  }
  const after = await read();
  if (after.v2Controllers.length > 0) {
    throw systemError(
      `crun cannot run on hybrid cgroups while controllers (${after.v2Controllers.join(', ')}) are on the cgroup v2 hierarchy; use runc`,
    );
  }
  return moved;
}
