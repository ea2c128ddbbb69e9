import type { BigIntStats } from 'node:fs';
import { constants } from 'node:fs';
import { chmod, lchown, link, lstat, lutimes, mkdir, open, readlink, rm, symlink } from 'node:fs/promises';
import { join, posix } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tarStream from 'tar-stream';
import { BerthError, errnoCode, errorMessage, invalidParameter, notFound } from '../../common/errors.js';
import { runTool } from '../../common/host/run-tool.js';
import { rfc3339Nano } from '../../common/time.js';
import { resolveUserInRootfs } from '../runtime/oci/user.js';
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
  private readonly mounts: Array<{ dest: string; source: string; rw: boolean }>;

  constructor(
    private readonly rootfs: string,
    private readonly c: Container,
  ) {
    this.mounts = mountsView(c.hostConfig, c.record.MountPoints)
      .filter(
        (m) => (m.Type === 'volume' || m.Type === 'bind') && typeof m.Source === 'string' && m.Source !== '',
      )
      .map((m) => ({
        dest: posix.normalize(String(m.Destination)),
        source: String(m.Source),
        rw: m.RW !== false,
      }))
      .sort((a, b) => b.dest.length - a.dest.length);
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

/** A tar member's name inside the extraction point, or an error for one that would leave it. */
function memberPath(name: string): string {
  const clean = posix.normalize(`/${name}`).slice(1);
  if (name.split('/').includes('..'))
    throw invalidParameter(`invalid tar member name ${JSON.stringify(name)}`);
  return clean;
}

/** One tar member written at `target` (a host path whose parent is resolved and in place). */
async function writeMember(
  fs: ContainerFs,
  destC: string,
  target: string,
  h: tarStream.Header,
  entry: AsyncIterable<unknown> & { resume(): unknown },
  owner: { uid: number; gid: number } | undefined,
): Promise<void> {
  const mode = (h.mode ?? 0o644) & 0o7777;
  switch (h.type) {
    case 'file':
    case 'contiguous-file': {
      const handle = await open(
        target,
        constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
        mode,
      );
      try {
        // consumed to its end (a pipeline would end the member early and stall the archive)
        for await (const chunk of entry) await handle.write(chunk as Buffer);
        await handle.chmod(mode);
      } finally {
        await handle.close();
      }
      break;
    }
    case 'directory':
      entry.resume();
      await mkdir(target, { mode }).catch((err) => {
        if (errnoCode(err) !== 'EEXIST') throw err;
      });
      await chmod(target, mode);
      break;
    case 'symlink':
      entry.resume();
      await symlink(h.linkname ?? '', target);
      break;
    case 'link': {
      entry.resume();
      const source = await fs.resolve(posix.join(destC, memberPath(h.linkname ?? '')), false);
      await link(fs.host(source), target);
      break;
    }
    case 'character-device':
    case 'block-device': {
      entry.resume();
      const kind = h.type === 'block-device' ? 'b' : 'c';
      const r = await runTool('mknod', [
        '-m',
        mode.toString(8),
        target,
        kind,
        String(h.devmajor ?? 0),
        String(h.devminor ?? 0),
      ]);
      if (r.code !== 0) throw invalidParameter(`cannot make device ${h.name}: ${r.stderr}`);
      break;
    }
    case 'fifo': {
      entry.resume();
      const r = await runTool('mkfifo', ['-m', mode.toString(8), target]);
      if (r.code !== 0) throw invalidParameter(`cannot make fifo ${h.name}: ${r.stderr}`);
      break;
    }
    default:
      entry.resume();
      return;
  }
  await lchown(target, owner?.uid ?? h.uid ?? 0, owner?.gid ?? h.gid ?? 0);
  const mtime = h.mtime ?? new Date();
  await lutimes(target, mtime, mtime);
}

/**
 * PUT /containers/{id}/archive (docker cp into a container): a tar extracted into a directory of
 * the container, every member's parent resolved inside the container's filesystem as for reading
 * (no link leads out of it; members with `..` are refused), an existing entry replaced (or, with
 * `noOverwriteDirNonDir`, a directory and a non-directory never replace each other), owners from
 * the tar or, with `copyUIDGID`, the container's user. A running container is frozen while its
 * files change, so that it cannot swap a directory for a link under the copy. Emits
 * `extract-to-dir`.
 */
export async function extractToContainer(
  ix: Internals,
  c: Container,
  path: string,
  body: Readable,
  o: { noOverwriteDirNonDir: boolean; copyUIDGID: boolean },
): Promise<void> {
  const { clean } = requestedPath(path);
  const { dir, release } = await borrowRootfs(ix, c);
  const freeze = c.isRunningProcess && !c.state.Paused;
  let frozen = false;
  try {
    if (freeze) {
      await ix.runtime.pause(c.id);
      frozen = true;
    }
    const fs = new ContainerFs(dir, c);
    const destC = await fs.resolve(clean, true, path);
    const st = await lstat(fs.host(destC)).catch((err) => {
      if (errnoCode(err) === 'ENOENT' || errnoCode(err) === 'ENOTDIR') {
        throw notFound(`Could not find the file ${path} in container ${c.name.replace(/^\//, '')}`);
      }
      throw err;
    });
    if (!st.isDirectory()) throw invalidParameter('extraction point is not a directory');
    fs.checkWritable(destC);
    const owner = o.copyUIDGID ? await resolveUserInRootfs(dir, c.record.Config.User ?? '') : undefined;
    const extract = tarStream.extract();
    const feeding = pipeline(body, extract).catch((err) => {
      throw invalidParameter(`cannot read the archive: ${errorMessage(err)}`);
    });
    feeding.catch(() => undefined);
    for await (const entry of extract) {
      const h = entry.header;
      const rel = memberPath(h.name);
      if (rel === '' || rel === '.') {
        entry.resume();
        continue;
      }
      const full = posix.join(destC, rel);
      const parent = await fs.mkdirAll(posix.dirname(full));
      const placed = posix.join(parent, posix.basename(full));
      fs.checkWritable(placed);
      const target = fs.host(placed);
      const existing = await lstat(target).catch(() => undefined);
      const isDir = h.type === 'directory';
      if (existing) {
        if (o.noOverwriteDirNonDir && existing.isDirectory() !== isDir) {
          entry.resume();
          throw invalidParameter(
            existing.isDirectory()
              ? `cannot overwrite directory "${placed}" with non-directory "${h.name}"`
              : `cannot overwrite non-directory "${placed}" with directory "${h.name}"`,
          );
        }
        if (!(existing.isDirectory() && isDir)) await rm(target, { recursive: true, force: true });
      }
      await writeMember(fs, destC, target, h, entry, owner ? { uid: owner.uid, gid: owner.gid } : undefined);
    }
    await feeding;
    emit(ix, c, 'extract-to-dir');
  } finally {
    if (frozen) await ix.runtime.resume(c.id).catch(() => undefined);
    release();
  }
}
