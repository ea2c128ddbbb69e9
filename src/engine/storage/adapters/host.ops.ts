import { spawn } from 'node:child_process';
import type { Readable } from 'node:stream';
import { BerthError, errorMessage, invalidParameter, systemError } from '../../../common/errors.js';
import { runTool, runToolOk } from '../../../common/host/run-tool.js';
import { type SysHelper, sysHelper } from '../../../common/host/sys-helper.js';
import { unmountWithRetry } from '../../../common/host/unmount.js';

/**
 * Everything the storage layer asks of the host that Node cannot do itself (mount, mknod,
 * setxattr, fast tar extraction with devices, owners and xattrs). Unit tests substitute a fake;
 * the engine uses HostStorageOps, which runs the Debian tools (util-linux, coreutils, attr, tar).
 */
export interface StorageOps {
  /**
   * Mount an overlay. Paths in `lowerdirs`, `upperdir` and `workdir` may be relative to `cwd`
   * (short layer links), which keeps the option string within one page.
   */
  mountOverlay(opts: {
    cwd: string;
    lowerdirs: string[];
    upperdir?: string;
    workdir?: string;
    target: string;
    extraOptions?: string[];
  }): Promise<void>;
  /** Unmount; a target that is not mounted is not an error. */
  unmount(target: string): Promise<void>;
  /** Overlay whiteouts: character devices 0/0 at each path. */
  makeWhiteouts(paths: string[]): Promise<void>;
  /** Mark directories opaque (`trusted.overlay.opaque=y`). */
  setOpaque(dirs: string[]): Promise<void>;
  /**
   * Extract an uncompressed tar stream into `dir` keeping numeric owners, modes, mtimes, devices,
   * hard links and xattrs; members matching `exclude` (basename globs) are skipped.
   */
  extractTar(input: Readable, dir: string, exclude: string[]): Promise<void>;
  /**
   * An uncompressed POSIX tar of `members` of `dir` (numeric owners, xattrs, hard links,
   * devices); by default `.`, so member names are `./...`; `done` settles when tar exits.
   */
  createTar(dir: string, members?: string[]): { stdout: Readable; done: Promise<void>; kill(): void };
  /**
   * Set by the host's own ops: a large layer may be unpacked on a worker thread, which runs its
   * own HostStorageOps (storage/unpack.thread.ts). Fakes leave it unset and see every call.
   */
  readonly unpackThreads?: boolean;
  /** Start an external decompressor (bzip2, xz, zstd); gzip is decompressed in-process. */
  decompressor(kind: 'bzip2' | 'xz' | 'zstd'): {
    stdin: NodeJS.WritableStream;
    stdout: Readable;
    done: Promise<void>;
    kill(): void;
  };
}

/** What tar says when the host, not the archive, is at fault. */
const SERVER_FAULT =
  /No space left on device|Disk quota exceeded|Input\/output error|Read-only file system|Cannot allocate memory|memory exhausted|Too many open files|Permission denied|Stale file handle/;

/**
 * The real thing: mount(2)/umount2(2) through berth-sys (util-linux mount/umount when it was not
 * built), coreutils mknod (through sh), attr's setfattr, GNU tar.
 */
export class HostStorageOps implements StorageOps {
  readonly unpackThreads = true;

  /** `sys`: the helper for mounts (default: the process's; null: mount(8) and umount(8)). */
  constructor(private readonly sys: SysHelper | null = sysHelper()) {}

  async mountOverlay(opts: {
    cwd: string;
    lowerdirs: string[];
    upperdir?: string;
    workdir?: string;
    target: string;
    extraOptions?: string[];
  }): Promise<void> {
    const parts = [`lowerdir=${opts.lowerdirs.join(':')}`];
    if (opts.upperdir) parts.push(`upperdir=${opts.upperdir}`, `workdir=${opts.workdir ?? ''}`);
    parts.push(...(opts.extraOptions ?? []));
    const options = parts.join(',');
    if (options.length >= 4096) {
      throw systemError(`overlay mount options exceed one page (${options.length} bytes): too many layers`);
    }
    if (!this.sys) {
      await runToolOk('mount', ['-t', 'overlay', 'overlay', '-o', options, opts.target], { cwd: opts.cwd });
      return;
    }
    try {
      await this.sys.mount({
        source: 'overlay',
        fstype: 'overlay',
        target: opts.target,
        data: options,
        cwd: opts.cwd,
      });
    } catch (err) {
      throw systemError(`mount -t overlay overlay -o ${options} ${opts.target}: ${errorMessage(err)}`);
    }
  }

  async unmount(target: string): Promise<void> {
    await unmountWithRetry(target, this.sys);
  }

  async makeWhiteouts(paths: string[]): Promise<void> {
    for (let i = 0; i < paths.length; i += 500) {
      const batch = paths.slice(i, i + 500);
      await runToolOk('sh', [
        '-c',
        'for p; do rm -rf -- "$p" && mknod -- "$p" c 0 0 || exit 1; done',
        'sh',
        ...batch,
      ]);
    }
  }

  async setOpaque(dirs: string[]): Promise<void> {
    for (let i = 0; i < dirs.length; i += 500) {
      await runToolOk('setfattr', [
        '-n',
        'trusted.overlay.opaque',
        '-v',
        'y',
        '--',
        ...dirs.slice(i, i + 500),
      ]);
    }
  }

  async extractTar(input: Readable, dir: string, exclude: string[]): Promise<void> {
    const args = [
      '-x',
      // 1 MiB reads (tar's default is 10 KiB: tens of thousands of reads for a large layer;
      // from a pipe GNU tar gathers whole records, and takes a short last one)
      '-b',
      '2048',
      '-f',
      '-',
      '-C',
      dir,
      '--numeric-owner',
      '--same-owner',
      '--same-permissions',
      '--xattrs',
      '--xattrs-include=*',
      '--warning=no-unknown-keyword',
      '--warning=no-timestamp',
      ...exclude.map((p) => `--exclude=${p}`),
    ];
    const r = await runTool('tar', args, { input });
    if (r.code === 0) return;
    // tar names members, never dir; its warnings and summary line say nothing of the cause
    const lines = r.stderr
      .replace(/^tar: /gm, '')
      .split('\n')
      .filter((l) => l && !/^Removing leading|^Exiting with failure status/.test(l));
    const msg = lines.slice(0, 3).join('; ') || `tar exited ${r.code}`;
    // a stream tar-stream parsed that tar cannot write is the archive's fault (a member through
    // a link, a hard link to nothing, `..`, a name too long); the host's faults are the engine's
    if (r.code >= 128 || SERVER_FAULT.test(r.stderr)) {
      throw new BerthError('System', `extracting layer: ${msg}`);
    }
    throw invalidParameter(`invalid layer tar: ${msg}`);
  }

  createTar(dir: string, members: string[] = ['.']): { stdout: Readable; done: Promise<void>; kill(): void } {
    return tarDirectory(dir, members);
  }

  decompressor(kind: 'bzip2' | 'xz' | 'zstd'): {
    stdin: NodeJS.WritableStream;
    stdout: Readable;
    done: Promise<void>;
    kill(): void;
  } {
    const child = spawn(kind, ['-d', '-c'], { stdio: ['pipe', 'pipe', 'pipe'] });
    const err: Buffer[] = [];
    child.stderr.on('data', (d: Buffer) => err.push(d));
    child.stdin.on('error', () => undefined);
    const done = new Promise<void>((resolve, reject) => {
      child.on('error', (e) => reject(invalidParameter(`cannot decompress ${kind} layer: ${e.message}`)));
      child.on('close', (code) => {
        if (code === 0) resolve();
        else reject(invalidParameter(`${kind}: ${Buffer.concat(err).toString('utf8').trim()}`));
      });
    });
    done.catch(() => undefined);
    return { stdin: child.stdin, stdout: child.stdout, done, kill: () => child.kill('SIGKILL') };
  }
}

/**
 * GNU tar of `members` of `dir` to standard output: uncompressed POSIX, numeric owners, xattrs,
 * hard links, devices (layer export, docker export).
 */
export function tarDirectory(
  dir: string,
  members: string[] = ['.'],
  extraArgs: string[] = [],
): { stdout: Readable; done: Promise<void>; kill(): void } {
  const args = [
    '-c',
    '-f',
    '-',
    '-C',
    dir,
    '--numeric-owner',
    '--xattrs',
    '--xattrs-include=*',
    '--format=posix',
    '--pax-option=delete=atime,delete=ctime',
    ...extraArgs,
    '--',
    ...members,
  ];
  const child = spawn('tar', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const err: Buffer[] = [];
  child.stderr.on('data', (d: Buffer) => {
    if (err.length < 64) err.push(d);
  });
  const done = new Promise<void>((resolve, reject) => {
    child.on('error', (e) => reject(systemError(`cannot run tar: ${e.message}`)));
    child.on('close', (code) => {
      if (code === 0) resolve();
      else reject(systemError(`tar -c ${dir}: ${Buffer.concat(err).toString('utf8').trim()}`));
    });
  });
  done.catch(() => undefined);
  return { stdout: child.stdout, done, kill: () => child.kill('SIGKILL') };
}
