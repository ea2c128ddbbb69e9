import { chmod, chown, mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { notFound } from '../../../common/errors.js';
import type { VolumeOps } from '../../volumes/mount.adapter.js';
import type { AssignedObject, AssignedTask } from '../cluster-api/assignments.types.js';
import type { FileTarget } from '../services/service.types.js';
import { configTarget, secretTarget, type TaskFileMount } from './container-config.js';

/**
 * A task's secrets and configs on its node: files in a tmpfs of the task's own
 * (`<exec-root>/swarm/tasks/<task>`, never on disk), each with its File's owner and mode (0444 by
 * default), bound read-only into the container at its target. Unmounted and removed with the
 * task, and all of them when the node leaves.
 */

export type TmpfsHost = Pick<VolumeOps, 'mount' | 'unmount' | 'mountsUnder'>;

/** swarmkit's size cap of the secrets tmpfs is far above a secret's 500 KiB; this holds many. */
const TMPFS_OPTIONS = 'mode=0700,size=64m';

function owner(v: string | undefined): number {
  const n = Number(v ?? '0');
  return Number.isInteger(n) && n >= 0 ? n : 0;
}

export class TaskFiles {
  constructor(
    /** `<exec-root>/swarm/tasks`. */
    private readonly dir: string,
    private readonly host: TmpfsHost,
  ) {}

  /** Writes the task's files (a fresh tmpfs); the mounts the container gets. */
  async prepare(
    a: AssignedTask,
    secrets: Map<string, AssignedObject>,
    configs: Map<string, AssignedObject>,
  ): Promise<TaskFileMount[]> {
    const spec = a.Task.Spec.ContainerSpec;
    const files: { data: Buffer; file: FileTarget | undefined; target: string; name: string }[] = [];
    for (const ref of spec?.Secrets ?? []) {
      const obj = ref.SecretID ? secrets.get(ref.SecretID) : undefined;
      if (!obj) throw notFound(`secret ${ref.SecretName ?? ref.SecretID ?? ''} not found`);
      const name = ref.File?.Name || obj.Name;
      files.push({ data: Buffer.from(obj.Data, 'base64'), file: ref.File, target: secretTarget(name), name });
    }
    for (const ref of spec?.Configs ?? []) {
      // a Runtime target (credential specs) is no file
      if (ref.Runtime) continue;
      const obj = ref.ConfigID ? configs.get(ref.ConfigID) : undefined;
      if (!obj) throw notFound(`config ${ref.ConfigName ?? ref.ConfigID ?? ''} not found`);
      const name = ref.File?.Name || obj.Name;
      files.push({ data: Buffer.from(obj.Data, 'base64'), file: ref.File, target: configTarget(name), name });
    }
    if (files.length === 0) return [];
    const dir = join(this.dir, a.Task.ID);
    await this.remove(a.Task.ID);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await this.host.mount({ type: 'tmpfs', device: 'tmpfs', options: TMPFS_OPTIONS, target: dir });
    const mounts: TaskFileMount[] = [];
    for (const [i, f] of files.entries()) {
      const path = join(dir, `file-${i}`);
      const mode = f.file?.Mode ?? 0o444;
      await writeFile(path, f.data, { mode });
      await chown(path, owner(f.file?.UID), owner(f.file?.GID));
      // the umask does not decide a secret's mode
      await chmod(path, mode);
      mounts.push({ source: path, target: f.target });
    }
    return mounts;
  }

  /** The task's tmpfs and directory gone (nothing there is no error). */
  async remove(taskId: string): Promise<void> {
    const dir = join(this.dir, taskId);
    for (const m of (await this.host.mountsUnder(dir)).reverse()) await this.host.unmount(m);
    await rm(dir, { recursive: true, force: true });
  }

  /** Every task's files gone (the node leaves). */
  async removeAll(): Promise<void> {
    for (const m of (await this.host.mountsUnder(this.dir)).reverse()) await this.host.unmount(m);
    await rm(this.dir, { recursive: true, force: true });
  }
}
