import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { errnoCode } from '../../../common/errors.js';
import { readdir, readFile, rmdir, rmSmallTree, stat } from '../../../common/fs/quick.js';

/** Whether `pid` is still the process that started at `startTime` (field 22 of /proc/<pid>/stat). */
export async function sameProcessAlive(
  pid: number,
  startTime: string | number | undefined,
): Promise<boolean> {
  if (!(pid > 0)) return false;
  let stat: string;
  try {
    stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return false;
  }
  if (startTime === undefined) return true;
  // the command name (field 2) may hold spaces: count from the last ')'
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return fields[19] === String(startTime);
}

/**
 * The entries of /sys/fs/cgroup (the hierarchies crun made the container's cgroup in), read once:
 * they change only when a hierarchy is mounted, which the engine does (crun's preparation) before
 * the first container it runs with crun, and so before any it deletes.
 */
let hierarchies: Promise<string[]> | undefined;
function cgroupHierarchies(): Promise<string[]> {
  if (!hierarchies) {
    hierarchies = readdir('/sys/fs/cgroup');
    hierarchies.catch(() => {
      hierarchies = undefined;
    });
  }
  return hierarchies.catch(() => [] as string[]);
}

let unified: boolean | undefined;
function unifiedAtRoot(): boolean {
  unified ??= existsSync('/sys/fs/cgroup/cgroup.controllers');
  return unified;
}

async function removeCgroup(path: string): Promise<boolean> {
  try {
    await rmdir(path);
    return true;
  } catch (err) {
    return errnoCode(err) === 'ENOENT';
  }
}

/**
 * What `runtime delete` does for a container whose init process has exited, done in-process (it
 * saves one runtime invocation on every container removal): remove its cgroups and its state
 * directory. Returns false, having changed nothing that matters, whenever the container may still
 * have processes (init alive, a cgroup not empty) or the state is not understood: then the caller
 * runs `runtime delete --force`.
 */
export async function deleteStopped(runtime: string, stateRoot: string, id: string): Promise<boolean> {
  const dir = join(stateRoot, id);
  let cgroups: string[];
  try {
    if (runtime === 'runc') {
      const st = JSON.parse(await readFile(join(dir, 'state.json'), 'utf8')) as {
        init_process_pid?: number;
        init_process_start?: string | number;
        cgroup_paths?: Record<string, string>;
      };
      if (!st.cgroup_paths || (await sameProcessAlive(st.init_process_pid ?? 0, st.init_process_start)))
        return false;
      cgroups = Object.values(st.cgroup_paths);
    } else if (runtime === 'crun') {
      const st = JSON.parse(await readFile(join(dir, 'status'), 'utf8')) as {
        pid?: number;
        'process-start-time'?: number;
        'cgroup-path'?: string;
        'systemd-cgroup'?: boolean;
      };
      const rel = st['cgroup-path'];
      if (!rel || st['systemd-cgroup'] || (await sameProcessAlive(st.pid ?? 0, st['process-start-time'])))
        return false;
      const controllers = await cgroupHierarchies();
      cgroups = controllers.map((c) => join('/sys/fs/cgroup', c, rel));
      // cgroup v2 mounted at /sys/fs/cgroup itself (on hybrid hosts it is one of the entries)
      if (unifiedAtRoot()) cgroups.push(join('/sys/fs/cgroup', rel));
    } else return false;
  } catch {
    return false;
  }
  for (const path of cgroups) {
    // a cgroup that still has processes (shared PID namespace) cannot go: let the runtime kill them
    if (!(await removeCgroup(path))) return false;
  }
  await rmSmallTree(dir);
  return true;
}

/**
 * Whether the runtime keeps any state for `id` (its directory under the runtime's root). Without
 * it `runtime delete --force` has nothing to do (runc and crun answer "does not exist" and change
 * nothing), so the caller can skip running it: a container deleted already (at its exit) or never
 * created. Errors other than ENOENT count as "maybe": the runtime is asked then.
 */
export async function runtimeStateExists(stateRoot: string, id: string): Promise<boolean> {
  try {
    await stat(join(stateRoot, id));
    return true;
  } catch (err) {
    return errnoCode(err) !== 'ENOENT';
  }
}
