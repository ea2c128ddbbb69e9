import { readFile } from 'node:fs/promises';
import { systemError } from '../../common/errors.js';
import { runTool } from '../../common/host/run-tool.js';
import { unmountWithRetry } from '../../common/host/unmount.js';
import { mountFailure } from './options.js';

/**
 * Everything the volumes service asks of the host beyond plain file I/O: mounting a volume's
 * device (tmpfs, a bind, a block device), unmounting it, reading the mount table, and copying
 * an image's directory into a fresh volume with owners, modes, times, links and xattrs.
 * Unit tests substitute a fake; the engine uses HostVolumeOps (util-linux, coreutils).
 */
export interface VolumeOps {
  /**
   * Mount `device` on `target`. Fails with moby's local driver text (`failed to mount local
   * volume: mount <device>:<target>, flags: 0x1000: no such file or directory`).
   */
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

/**
 * Why mount(8) failed, in Go's words for the errno (`no such file or directory`): libmount's
 * debug output (LIBMOUNT_DEBUG=cxt) names the errno of the last failed mount(2); Go's texts are
 * the C library's with a lower-case first letter. Without such a line (a helper such as
 * mount.nfs failed, or mount(8) refused before the call) mount(8)'s own message.
 */
export function mountErrorReason(stderr: string): string {
  const lines = stderr.split('\n');
  let reason = '';
  for (const line of lines) {
    const m = /mount\(2\) failed \[errno=\d+ ([^\]]+)\]/.exec(line);
    if (m?.[1]) reason = m[1];
  }
  if (reason) return reason.charAt(0).toLowerCase() + reason.slice(1);
  const own = lines
    .filter((l) => !/^\s*\d+: libmount:/.test(l) && !/dmesg\(1\) may have more information/.test(l))
    .map((l) => l.trim())
    .filter(Boolean)
    .join(' ');
  return own.replace(/^mount: (?:[^:]*: )?/, '').replace(/\.$/, '') || 'mount failed';
}

/**
 * mount(8) with C messages and libmount's context debug lines on stderr (kept whole, up to 1 MiB:
 * they come a line at a time), to learn the errno of mount(2).
 */
function runMount(args: string[]) {
  return runTool('mount', args, { env: { LC_ALL: 'C', LIBMOUNT_DEBUG: 'cxt' }, stderrLimit: 1 << 20 });
}

export class HostVolumeOps implements VolumeOps {
  async mount(opts: { type: string; device: string; options: string; target: string }): Promise<void> {
    const args: string[] = [];
    if (opts.type && opts.type !== 'none') args.push('-t', opts.type);
    if (opts.options) args.push('-o', opts.options);
    args.push(opts.device, opts.target);
    const r = await runMount(args);
    if (r.code !== 0) throw systemError(mountFailure(opts, mountErrorReason(r.stderr)));
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
