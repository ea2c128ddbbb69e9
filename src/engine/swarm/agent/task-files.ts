import { chmod, chown, mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { errorMessage, invalidParameter, notFound } from '../../../common/errors.js';
import type { VolumeOps } from '../../volumes/mount.adapter.js';
import type { AssignedObject, AssignedTask } from '../cluster-api/assignments.types.js';
import type { FileTarget } from '../services/service.types.js';
import { configTarget, secretTarget, type TaskFileMount, templateContext } from './container-config.js';
import { expandPayload, type PayloadFunctions } from './templates.js';

/**
 * A task's secrets and configs on its node: files in a tmpfs of the task's own
 * (`<exec-root>/swarm/tasks/<task>`, never on disk), each with its File's owner and mode (0444 by
 * default), bound read-only into the container at its target; a templated one expanded for the
 * task (templates.ts). Unmounted and removed with the task, and all of them when the node leaves.
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
    const refs: {
      kind: 'secret' | 'config';
      obj: AssignedObject;
      file: FileTarget | undefined;
      name: string;
    }[] = [];
    for (const ref of spec?.Secrets ?? []) {
      const obj = ref.SecretID ? secrets.get(ref.SecretID) : undefined;
      if (!obj) throw notFound(`secret ${ref.SecretName ?? ref.SecretID ?? ''} not found`);
      refs.push({ kind: 'secret', obj, file: ref.File, name: ref.File?.Name || obj.Name });
    }
    for (const ref of spec?.Configs ?? []) {
      // a Runtime target (credential specs) is no file
      if (ref.Runtime) continue;
      const obj = ref.ConfigID ? configs.get(ref.ConfigID) : undefined;
      if (!obj) throw notFound(`config ${ref.ConfigName ?? ref.ConfigID ?? ''} not found`);
      refs.push({ kind: 'config', obj, file: ref.File, name: ref.File?.Name || obj.Name });
    }
    const expand = this.payloadExpander(a, refs);
    const files = refs.map((r) => ({
      data: expand(r.kind, r.obj),
      file: r.file,
      target: r.kind === 'secret' ? secretTarget(r.name) : configTarget(r.name),
    }));
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

  /**
   * An object's data for this task: a templated one (`Templating {Name: "golang"}`) expanded as
   * swarmkit's agent does, `{{secret "t"}}`/`{{config "t"}}` giving the raw data of the task's own
   * reference with that target name, `{{env "X"}}` its container Env as given.
   */
  private payloadExpander(
    a: AssignedTask,
    refs: { kind: 'secret' | 'config'; obj: AssignedObject; name: string }[],
  ): (kind: 'secret' | 'config', obj: AssignedObject) => Buffer {
    // dockerd's executor gives its templated getters no node description (moby's
    // executor.Controller passes nil): `.Node.Hostname` and `.Node.Platform.*` are empty here,
    // `.Node.ID` comes from the task (dockerd 20.10 renders the same)
    const ctx = templateContext(a, { ID: a.Task.NodeID ?? '', Hostname: '' });
    ctx.Node.Platform = { OS: '', Architecture: '' };
    const raw = (kind: 'secret' | 'config', target: string): string => {
      const ref = refs.find((r) => r.kind === kind && r.name === target);
      if (!ref) throw new Error(`${kind} target ${target} not found`);
      return Buffer.from(ref.obj.Data, 'base64').toString('utf8');
    };
    const fns: PayloadFunctions = {
      env: (name) => {
        for (const e of a.Task.Spec.ContainerSpec?.Env ?? []) {
          const eq = e.indexOf('=');
          if (eq > 0 && e.slice(0, eq) === name) return e.slice(eq + 1);
        }
        return '';
      },
      secret: (target) => raw('secret', target),
      config: (target) => raw('config', target),
    };
    return (kind, obj) => {
      const data = Buffer.from(obj.Data, 'base64');
      if (!obj.Templating) return data;
      if (obj.Templating.Name !== 'golang')
        throw invalidParameter(`failed to expand templated ${kind} ${obj.ID}: unrecognized template type`);
      try {
        return Buffer.from(expandPayload(data.toString('utf8'), ctx, fns));
      } catch (err) {
        throw invalidParameter(`failed to expand templated ${kind} ${obj.ID}: ${errorMessage(err)}`);
      }
    };
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
