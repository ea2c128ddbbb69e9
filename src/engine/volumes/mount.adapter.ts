import { readFile } from 'node:fs/promises';
import { systemError } from '../../common/errors.js';
import { runTool } from '../../common/host/run-tool.js';
import { unmountWithRetry } from '../../common/host/unmount.js';

/**
 * Everything the volumes service asks of the host beyond plain file I/O: mounting a volume's
 * device (tmpfs, a bind, a block device), unmounting it, reading the mount table, and copying
 * an image's directory into a fresh volume with owners, modes, times, links and xattrs.
 * Unit tests substitute a fake; the engine uses HostVolumeOps (util-linux, coreutils).
 */
export interface VolumeOps {
  mount(opts: { type: string; device: string; options: string; target: string }): Promise<void>;
  /** Unmount; a target that is not mounted is not an error. */
  unmount(target: string): Promise<void>;
  /** Mount points at or below `dir` (from /proc/self/mountinfo). */
  mountsUnder(dir: string): Promise<string[]>;
  /** Copy the content of directory `src` into existing directory `dst` (`cp -a src/. dst/`). */
  copyTree(src: string, dst: string): Promise<void>;
}

/** Octal escapes of /proc/self/mountinfo paths (`\040` for a space). */
function unescapeMountPath(p: string): string {
  return p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
}

export class HostVolumeOps implements VolumeOps {
  async mount(opts: { type: string; device: string; options: string; target: string }): Promise<void> {
    const args: string[] = [];
    if (opts.type && opts.type !== 'none') args.push('-t', opts.type);
    if (opts.options) args.push('-o', opts.options);
    args.push(opts.device, opts.target);
    const r = await runTool('mount', args);
    if (r.code !== 0) throw systemError(`error while mounting volume '${opts.target}': ${r.stderr}`);
  }

  async unmount(target: string): Promise<void> {
    await unmountWithRetry(target);
  }

  async mountsUnder(dir: string): Promise<string[]> {
    const info = await readFile('/proc/self/mountinfo', 'utf8');
    const prefix = dir.endsWith('/') ? dir : `${dir}/`;
    const out: string[] = [];
    for (const line of info.split('\n')) {
      const field = line.split(' ')[4];
      if (!field) continue;
      const p = unescapeMountPath(field);
      if (p === dir || p.startsWith(prefix)) out.push(p);
    }
    return out;
  }

  async copyTree(src: string, dst: string): Promise<void> {
    const r = await runTool('cp', ['-a', '--', `${src}/.`, `${dst}/`]);
    if (r.code !== 0) throw systemError(`copying image content into the volume: ${r.stderr}`);
  }
}
