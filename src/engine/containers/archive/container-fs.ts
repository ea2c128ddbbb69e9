import { type BigIntStats, constants, existsSync } from 'node:fs';
import { type FileHandle, lstat, mkdir, open, readlink } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { BerthError, conflict, errnoCode, invalidParameter, notFound } from '../../../common/errors.js';
import { rfc3339Nano } from '../../../common/time.js';
import type { Container } from '../core/container.js';
import type { Rootfs } from '../core/rootfs.js';
import { mountsView } from '../core/views.js';
import { inContainerTerms } from './host-errors.js';

/** X-Docker-Container-Path-Stat: what docker cp learns of a path before it copies. */
export interface PathStat {
  name: string;
  size: number;
  /** Go's os.FileMode bits (not st_mode): the CLI asks IsDir() of it. */
  mode: number;
  mtime: string;
  /** For a symbolic link, where it leads in the container (resolved); '' otherwise. */
  linkTarget: string;
}

const MAX_LINKS = 40;

/** Go's os.FileMode for a stat. */
export function goFileMode(st: { mode: number | bigint }): number {
  const raw = Number(st.mode);
  let m = raw & 0o777;
  if (raw & 0o4000) m |= 1 << 23;
  if (raw & 0o2000) m |= 1 << 22;
  if (raw & 0o1000) m |= 1 << 20;
  switch (raw & 0o170000) {
    case 0o040000:
      m |= 2 ** 31;
      break;
    case 0o120000:
      m |= 1 << 27;
      break;
    case 0o010000:
      m |= 1 << 25;
      break;
    case 0o140000:
      m |= 1 << 24;
      break;
    case 0o060000:
      m |= 1 << 26;
      break;
    case 0o020000:
      m |= (1 << 26) | (1 << 21);
      break;
  }
  return m >>> 0;
}

/**
 * A directory of a container held open by the engine. Its entries are reached through the
 * engine's descriptor (`/proc/self/fd/<fd>/<name>`), so an operation on one of them never
 * follows a link that something else swapped in for a directory after the path was resolved
 * (another container sharing a volume, a host user owning a bind's source: the container being
 * written to is frozen, they are not).
 */
export interface HeldDir {
  /** Its container path (resolved: no link in it). */
  readonly path: string;
  /** A path to `name` in it for the engine's own calls. */
  entry(name: string): string;
  /** The same for a host tool (another process). */
  toolEntry(name: string): string;
  close(): Promise<void>;
}

/** Where an entry of a container is written: anchored in its held parent, or a mount's source. */
export interface Place {
  /** Its container path. */
  readonly path: string;
  /** The path the engine's calls use. */
  readonly host: string;
  /** The path a host tool uses. */
  readonly tool: string;
  /** Reached through its held parent (false: a mount point, reached at its source). */
  readonly anchored: boolean;
}

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/**
 * A container's paths on the host: its rootfs, and the volumes and binds mounted over parts of
 * it (the deepest mount point that holds a path wins).
 */
export class ContainerFs {
  private readonly mounts: Array<{ dest: string; source: string; rw: boolean }>;
  /** The container paths of the directories held open, by descriptor. */
  private readonly held = new Map<number, string>();

  constructor(
    private readonly rootfs: string,
    private readonly c: Container,
  ) {
    const mounts = mountsView(c.hostConfig, c.record.MountPoints)
      .filter((m) => (m.Type === 'volume' || m.Type === 'bind') && m.Source !== '')
      .map((m) => ({ dest: posix.normalize(m.Destination), source: m.Source, rw: m.RW }));
    // dockerd's NetworkMounts: the engine's /etc files once written (the first start), unless
    // the container mounts something there itself
    const rec = c.record;
    for (const [dest, source] of [
      ['/etc/resolv.conf', rec.ResolvConfPath],
      ['/etc/hostname', rec.HostnamePath],
      ['/etc/hosts', rec.HostsPath],
    ] as const) {
      if (!source || !existsSync(source) || mounts.some((m) => m.dest === dest)) continue;
      mounts.push({ dest, source, rw: !c.hostConfig.ReadonlyRootfs });
    }
    this.mounts = mounts.sort((a, b) => b.dest.length - a.dest.length);
  }

  /**
   * The container path of a host path under the rootfs or a mount (the deepest source that holds
   * it), undefined for one outside them: error messages show this, never the host's.
   */
  containerPathOf(hostPath: string): string | undefined {
    const fdPath = /^\/proc\/(?:self|\d+)\/fd\/(\d+)(\/.*)?$/.exec(hostPath);
    if (fdPath) {
      const dir = this.held.get(Number(fdPath[1]));
      return dir === undefined ? undefined : posix.join(dir, fdPath[2] ?? '');
    }
    const places = [...this.mounts, { dest: '/', source: this.rootfs }].sort(
      (a, b) => b.source.length - a.source.length,
    );
    for (const p of places) {
      if (hostPath === p.source) return p.dest;
      const base = p.source.endsWith('/') ? p.source : `${p.source}/`;
      if (hostPath.startsWith(base)) return posix.join(p.dest, hostPath.slice(base.length));
    }
    return undefined;
  }

  private mountOf(path: string): { dest: string; source: string; rw: boolean } | undefined {
    return this.mounts.find((m) => path === m.dest || path.startsWith(`${m.dest}/`));
  }

  host(path: string): string {
    const m = this.mountOf(path);
    if (m) return path === m.dest ? m.source : join(m.source, path.slice(m.dest.length));
    return join(this.rootfs, path);
  }

  /** 403 when the container cannot write there (dockerd's messages). */
  checkWritable(path: string): void {
    const m = this.mountOf(path);
    if (m && !m.rw) throw new BerthError('Forbidden', 'mounted volume is marked read-only');
    if (!m && this.c.hostConfig.ReadonlyRootfs) {
      throw new BerthError('Forbidden', 'container rootfs is marked read-only');
    }
  }

  /**
   * Hold a directory open: `path` is resolved in the container (links followed) and opened from
   * its mount's root one component at a time without following any link, making the missing ones
   * (0755, root) when asked. A component that is not a directory is a 400; one that became a link
   * since it was resolved a 409.
   */
  async openDir(path: string, make: boolean): Promise<HeldDir> {
    const resolved = await this.resolve(path, true, path, make);
    const m = this.mountOf(resolved);
    const [rootHost, rootC] = m ? [m.source, m.dest] : [this.rootfs, '/'];
    const rest = resolved.slice(rootC.length).split('/').filter(Boolean);
    let handle = await open(rootHost, DIR_FLAGS);
    let cur = rootC;
    try {
      for (const name of rest) {
        const at = `/proc/self/fd/${handle.fd}/${name}`;
        cur = posix.join(cur, name);
        const next = await open(at, DIR_FLAGS)
          .catch(async (err) => {
            const code = errnoCode(err);
            if (code === 'ENOENT' && make) {
              this.checkWritable(cur);
              await mkdir(at, { mode: 0o755 }).catch((e) => {
                if (errnoCode(e) !== 'EEXIST') throw e;
              });
              return open(at, DIR_FLAGS);
            }
            throw err;
          })
          .catch(async (err) => {
            let code = errnoCode(err);
            // O_DIRECTORY|O_NOFOLLOW on a link: ENOTDIR or ELOOP
            if (code === 'ENOTDIR' && (await lstat(at).catch(() => undefined))?.isSymbolicLink())
              code = 'ELOOP';
            if (code === 'ENOTDIR') throw invalidParameter(`cannot extract into ${cur}: not a directory`);
            if (code === 'ELOOP') throw conflict(`${cur} was replaced by a symbolic link during the copy`);
            if (code === 'ENOENT') throw notFound(`Could not find the file ${cur}`);
            // told while the descriptor is open (its entries are below `cur`'s parent)
            const parent = posix.dirname(cur);
            const fdDir = `/proc/self/fd/${handle.fd}/`;
            throw inContainerTerms(err, {
              containerPathOf: (p) =>
                p.startsWith(fdDir) ? posix.join(parent, p.slice(fdDir.length)) : this.containerPathOf(p),
            });
          });
        await handle.close();
        handle = next;
      }
    } catch (err) {
      await handle.close();
      throw err;
    }
    return this.hold(resolved, handle);
  }

  private hold(path: string, handle: FileHandle): HeldDir {
    const fd = handle.fd;
    this.held.set(fd, path);
    return {
      path,
      entry: (name) => `/proc/self/fd/${fd}/${name}`,
      toolEntry: (name) => `/proc/${process.pid}/fd/${fd}/${name}`,
      close: async () => {
        this.held.delete(fd);
        await handle.close();
      },
    };
  }

  /**
   * Where `name` of a held directory is written: through the held directory, or, for the mount
   * point of a volume or bind (or one of the engine's /etc files), the mount's source itself.
   */
  place(dir: HeldDir, name: string): Place {
    const path = posix.join(dir.path, name);
    const m = this.mountOf(path);
    if (m && m.dest === path) return { path, host: m.source, tool: m.source, anchored: false };
    return { path, host: dir.entry(name), tool: dir.toolEntry(name), anchored: true };
  }

  /**
   * Resolve a container path with its symbolic links read inside the container (an absolute
   * target starts again at the container's root, `..` never leaves it); the last component is
   * followed only when asked. Missing components below the last one are a 404, unless
   * `missingOk` (the path is returned with them, to be made).
   */
  async resolve(path: string, followLast: boolean, shown = path, missingOk = false): Promise<string> {
    const queue = path.split('/');
    let cur = '/';
    let links = 0;
    while (queue.length) {
      const name = queue.shift() as string;
      if (name === '' || name === '.') continue;
      if (name === '..') {
        cur = posix.dirname(cur);
        continue;
      }
      const next = posix.join(cur, name);
      const last = queue.every((q) => q === '' || q === '.');
      if (last && !followLast) return next;
      let st: BigIntStats;
      try {
        st = await lstat(this.host(next), { bigint: true });
      } catch (err) {
        const code = errnoCode(err);
        if ((code === 'ENOENT' || code === 'ENOTDIR') && last) return next;
        // the rest is to be made (openDir): taken as it is, without `..` below what is missing
        const rest = queue.filter((q) => q !== '' && q !== '.');
        if ((code === 'ENOENT' || code === 'ENOTDIR') && missingOk && !rest.includes('..')) {
          return posix.join(next, ...rest);
        }
        if (code === 'ENOENT' || code === 'ENOTDIR') throw notFound(`Could not find the file ${shown}`);
        throw err;
      }
      if (st.isSymbolicLink()) {
        if (++links > MAX_LINKS) throw invalidParameter(`${shown}: too many levels of symbolic links`);
        const target = await readlink(this.host(next));
        if (target.startsWith('/')) cur = '/';
        queue.unshift(...target.split('/'));
        continue;
      }
      cur = next;
    }
    return cur;
  }
}

/** A path as the API gets it: absolute, cleaned; a trailing `/` or `/.` asks to follow a link. */
export function requestedPath(path: string): { clean: string; follow: boolean } {
  if (path === '') throw invalidParameter('bad parameter: path cannot be empty');
  const abs = path.startsWith('/') ? path : `/${path}`;
  return { clean: posix.normalize(abs), follow: abs.endsWith('/') || abs.endsWith('/.') };
}

export async function statOf(
  fs: ContainerFs,
  resolved: string,
  c: Container,
  requested: string,
): Promise<PathStat> {
  let st: BigIntStats;
  try {
    st = await lstat(fs.host(resolved), { bigint: true });
  } catch (err) {
    const code = errnoCode(err);
    if (code === 'ENOENT' || code === 'ENOTDIR') {
      throw notFound(`Could not find the file ${requested} in container ${c.name.replace(/^\//, '')}`);
    }
    throw err;
  }
  // `path/` and `path/.` name a directory (lstat's ENOTDIR, as dockerd's)
  if (requestedPath(requested).follow && !st.isDirectory()) {
    throw invalidParameter(`lstat ${requested}: not a directory`);
  }
  const ns = st.mtimeNs;
  return {
    name: resolved === '/' ? '/' : posix.basename(resolved),
    size: Number(st.size),
    mode: goFileMode(st),
    mtime: rfc3339Nano(Number(ns / 1_000_000n), Number(ns % 1_000_000n)),
    linkTarget: st.isSymbolicLink() ? await fs.resolve(resolved, true, requested) : '',
  };
}

/**
 * Run `work` on the container's filesystem (borrowed: a stopped container's is mounted for it),
 * its errors told in the container's terms (never a host path).
 */
export async function inContainer<T>(
  d: { rootfs: Pick<Rootfs, 'borrow'> },
  c: Container,
  work: (fs: ContainerFs, dir: string) => Promise<T>,
): Promise<T> {
  const { dir, release } = await d.rootfs.borrow(c);
  const fs = new ContainerFs(dir, c);
  try {
    return await work(fs, dir);
  } catch (err) {
    throw inContainerTerms(err, fs);
  } finally {
    release();
  }
}
