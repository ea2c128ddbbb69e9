import { constants } from 'node:fs';
import { chmod, lchown, link, lstat, lutimes, mkdir, open, rm, symlink } from 'node:fs/promises';
import { posix } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tarStream from 'tar-stream';
import { errnoCode, errorMessage, invalidParameter, notFound } from '../../../common/errors.js';
import { resolveUserInRootfs } from '../../runtime/oci/user.js';
import type { RuntimeDriver } from '../../runtime/runtime.types.js';
import type { Container } from '../core/container.js';
import type { ContainerEvents } from '../core/events.js';
import type { Rootfs } from '../core/rootfs.js';
import type { ArchiveHost } from './archive.host.js';
import { ContainerFs, type PathStat, requestedPath, statOf } from './container-fs.js';

/** docker cp: a path's stat, a tar of it, a tar extracted into the container (dockerd's archive). */

export interface CopyDeps {
  rootfs: Pick<Rootfs, 'borrow'>;
  runtime: Pick<RuntimeDriver, 'pause' | 'resume'>;
  events: ContainerEvents;
  host: Pick<ArchiveHost, 'mknod' | 'mkfifo' | 'tar'>;
}

/** HEAD /containers/{id}/archive: the stat of a path in the container (404 when missing). */
export async function statContainerPath(d: CopyDeps, c: Container, path: string): Promise<PathStat> {
  const { clean, follow } = requestedPath(path);
  const { dir, release } = await d.rootfs.borrow(c);
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
  d: CopyDeps,
  c: Container,
  path: string,
): Promise<{ stat: PathStat; stream: Readable; done: Promise<void>; cancel(): void }> {
  const { clean, follow } = requestedPath(path);
  const { dir, release } = await d.rootfs.borrow(c);
  try {
    const fs = new ContainerFs(dir, c);
    const resolved = await fs.resolve(clean, follow, path);
    const stat = await statOf(fs, resolved, c, path);
    const host = fs.host(resolved);
    const hostBase = posix.basename(host);
    const name = stat.name === '/' ? '.' : stat.name;
    const transform =
      hostBase === name ? [] : [`--transform=s|^${sedLiteral(hostBase, true)}|${sedLiteral(name, false)}|S`];
    const tar = d.host.tar(posix.dirname(host), [hostBase], transform);
    tar.done.then(release, release);
    tar.stdout.on('close', release);
    d.events.emit(c, 'archive-path');
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
  host: CopyDeps['host'],
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
      await host.mknod(target, kind, mode, h.devmajor ?? 0, h.devminor ?? 0).catch((err) => {
        throw invalidParameter(`cannot make device ${h.name}: ${errorMessage(err)}`);
      });
      break;
    }
    case 'fifo': {
      entry.resume();
      await host.mkfifo(target, mode).catch((err) => {
        throw invalidParameter(`cannot make fifo ${h.name}: ${errorMessage(err)}`);
      });
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
  d: CopyDeps,
  c: Container,
  path: string,
  body: Readable,
  o: { noOverwriteDirNonDir: boolean; copyUIDGID: boolean },
): Promise<void> {
  const { clean } = requestedPath(path);
  const { dir, release } = await d.rootfs.borrow(c);
  const freeze = c.isRunningProcess && !c.state.Paused;
  let frozen = false;
  try {
    if (freeze) {
      await d.runtime.pause(c.id);
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
      await writeMember(
        d.host,
        fs,
        destC,
        target,
        h,
        entry,
        owner ? { uid: owner.uid, gid: owner.gid } : undefined,
      );
    }
    await feeding;
    d.events.emit(c, 'extract-to-dir');
  } finally {
    if (frozen) await d.runtime.resume(c.id).catch(() => undefined);
    release();
  }
}
