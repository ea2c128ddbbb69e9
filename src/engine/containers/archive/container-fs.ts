import { type BigIntStats, existsSync } from 'node:fs';
import { lstat, mkdir, readlink } from 'node:fs/promises';
import { join, posix } from 'node:path';
import { BerthError, errnoCode, invalidParameter, notFound } from '../../../common/errors.js';
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
 * A container's paths on the host: its rootfs, and the volumes and binds mounted over parts of
 * it (the deepest mount point that holds a path wins).
 */
export class ContainerFs {
  private readonly mounts: Array<{ dest: string; source: string; rw: boolean }>;

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

  /** Resolve a directory path (links followed), making what is missing of it (0755, root). */
  async mkdirAll(path: string): Promise<string> {
    const resolved = await this.resolve(path, true);
    try {
      const st = await lstat(this.host(resolved));
      if (!st.isDirectory()) throw invalidParameter(`cannot extract into ${path}: not a directory`);
      return resolved;
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') throw err;
    }
    const parent = await this.mkdirAll(posix.dirname(resolved));
    const made = posix.join(parent, posix.basename(resolved));
    this.checkWritable(made);
    await mkdir(this.host(made), { mode: 0o755 }).catch((err) => {
      if (errnoCode(err) !== 'EEXIST') throw err;
    });
    return made;
  }

  /**
   * Resolve a container path with its symbolic links read inside the container (an absolute
   * target starts again at the container's root, `..` never leaves it); the last component is
   * followed only when asked. Missing components below the last one are a 404.
   */
  async resolve(path: string, followLast: boolean, shown = path): Promise<string> {
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
