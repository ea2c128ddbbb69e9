import type { BigIntStats } from 'node:fs';
import { lstat, readlink } from 'node:fs/promises';
import { join, posix } from 'node:path';
import type { Readable } from 'node:stream';
import { errnoCode, invalidParameter, notFound } from '../../common/errors.js';
import { rfc3339Nano } from '../../common/time.js';
import { tarDirectory } from '../storage/adapters/host.ops.js';
import { type Container, emit, type Internals } from './container.js';
import { borrowRootfs } from './rootfs.js';
import { mountsView } from './views.js';

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
class ContainerFs {
  private readonly mounts: Array<{ dest: string; source: string }>;

  constructor(
    private readonly rootfs: string,
    c: Container,
  ) {
    this.mounts = mountsView(c.hostConfig, c.record.MountPoints)
      .filter(
        (m) => (m.Type === 'volume' || m.Type === 'bind') && typeof m.Source === 'string' && m.Source !== '',
      )
      .map((m) => ({ dest: posix.normalize(String(m.Destination)), source: String(m.Source) }))
      .sort((a, b) => b.dest.length - a.dest.length);
  }

  host(path: string): string {
    for (const m of this.mounts) {
      if (path === m.dest) return m.source;
      if (path.startsWith(`${m.dest}/`)) return join(m.source, path.slice(m.dest.length));
    }
    return join(this.rootfs, path);
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
function requestedPath(path: string): { clean: string; follow: boolean } {
  if (path === '') throw invalidParameter('bad parameter: path cannot be empty');
  const abs = path.startsWith('/') ? path : `/${path}`;
  return { clean: posix.normalize(abs), follow: abs.endsWith('/') || abs.endsWith('/.') };
}

async function statOf(fs: ContainerFs, resolved: string, c: Container, requested: string): Promise<PathStat> {
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
  const ns = st.mtimeNs;
  return {
    name: resolved === '/' ? '/' : posix.basename(resolved),
    size: Number(st.size),
    mode: goFileMode(st),
    mtime: rfc3339Nano(Number(ns / 1_000_000n), Number(ns % 1_000_000n)),
    linkTarget: st.isSymbolicLink() ? await fs.resolve(resolved, true, requested) : '',
  };
}

/** HEAD /containers/{id}/archive: the stat of a path in the container (404 when missing). */
export async function statContainerPath(ix: Internals, c: Container, path: string): Promise<PathStat> {
  const { clean, follow } = requestedPath(path);
  const { dir, release } = await borrowRootfs(ix, c);
  try {
    const fs = new ContainerFs(dir, c);
    return await statOf(fs, await fs.resolve(clean, follow, path), c, path);
  } finally {
    release();
  }
}

/** A sed replacement for GNU tar's --transform: the text taken literally. */
function sedLiteral(text: string, pattern: boolean): string {
  return pattern ? text.replace(/[\\^$.*[\]|]/g, '\\$&') : text.replace(/[\\&|]/g, '\\$&');
}

/**
 * GET /containers/{id}/archive: a tar of a path in the container, its members named from the
 * path's base name (`d/`, `d/e/f`); a symbolic link is archived as a link unless the path asks to
 * follow it. Mounts under a copied directory are not descended into (their mount points are
 * there). Emits `archive-path`.
 */
export async function archiveContainerPath(
  ix: Internals,
  c: Container,
  path: string,
): Promise<{ stat: PathStat; stream: Readable; done: Promise<void>; cancel(): void }> {
  const { clean, follow } = requestedPath(path);
  const { dir, release } = await borrowRootfs(ix, c);
  try {
    const fs = new ContainerFs(dir, c);
    const resolved = await fs.resolve(clean, follow, path);
    const stat = await statOf(fs, resolved, c, path);
    const host = fs.host(resolved);
    const hostBase = posix.basename(host);
    const name = stat.name === '/' ? '.' : stat.name;
    const transform =
      hostBase === name ? [] : [`--transform=s|^${sedLiteral(hostBase, true)}|${sedLiteral(name, false)}|S`];
    const tar = tarDirectory(posix.dirname(host), [hostBase], transform);
    tar.done.then(release, release);
    tar.stdout.on('close', release);
    emit(ix, c, 'archive-path');
    return { stat, stream: tar.stdout, done: tar.done, cancel: () => tar.kill() };
  } catch (err) {
    release();
    throw err;
  }
}
