import { posix } from 'node:path';
import type { Readable } from 'node:stream';
import type { KeyedMutex } from '../../../common/mutex.js';
import type { RuntimeDriver } from '../../runtime/runtime.types.js';
import type { Container } from '../core/container.js';
import type { ContainerEvents } from '../core/events.js';
import type { Rootfs } from '../core/rootfs.js';
import type { ArchiveHost } from './archive.host.js';
import {
  ContainerFs,
  type HeldDir,
  inContainer,
  type PathStat,
  requestedPath,
  statOf,
} from './container-fs.js';
import { inContainerTerms } from './host-errors.js';
import type { UploadSpool } from './spool.js';

/** docker cp: a path's stat, a tar of it (extract.ts: a tar extracted into the container). */

export interface CopyDeps {
  rootfs: Pick<Rootfs, 'borrow'>;
  runtime: Pick<RuntimeDriver, 'pause' | 'resume'>;
  events: ContainerEvents;
  host: Pick<ArchiveHost, 'mknod' | 'mkfifo' | 'removeTree' | 'tar'>;
  /** Where uploads wait until complete (docker cp into a container). */
  spool: Pick<UploadSpool, 'checkDeclared' | 'receive'>;
  /** One upload at a time is written into a container (each freezes and thaws it). */
  writes: KeyedMutex;
}

/** HEAD /containers/{id}/archive: the stat of a path in the container (404 when missing). */
export async function statContainerPath(d: CopyDeps, c: Container, path: string): Promise<PathStat> {
  const { clean, follow } = requestedPath(path);
  return inContainer(d, c, async (fs) => statOf(fs, await fs.resolve(clean, follow, path), c, path));
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
  const { dir, release: releaseRootfs } = await d.rootfs.borrow(c);
  const fs = new ContainerFs(dir, c);
  let held: HeldDir | undefined;
  const release = () => {
    releaseRootfs();
    held?.close().catch(() => undefined);
    held = undefined;
  };
  try {
    const resolved = await fs.resolve(clean, follow, path);
    const stat = await statOf(fs, resolved, c, path);
    // tar works in the parent held open (anchored: a link the running container swaps in for a
    // directory of the path is not followed); the rootfs and a mount point are the engine's paths
    let where: string;
    if (resolved === '/') where = fs.host('/');
    else {
      held = await fs.openDir(posix.dirname(resolved), false);
      const at = fs.place(held, posix.basename(resolved));
      where = at.anchored ? posix.join(held.toolEntry('.'), posix.basename(resolved)) : at.host;
    }
    const hostBase = posix.basename(where);
    const name = stat.name === '/' ? '.' : stat.name;
    const transform =
      hostBase === name ? [] : [`--transform=s|^${sedLiteral(hostBase, true)}|${sedLiteral(name, false)}|S`];
    const tar = d.host.tar(posix.dirname(where), [hostBase], transform);
    tar.done.then(release, release);
    tar.stdout.on('close', release);
    d.events.emit(c, 'archive-path');
    return { stat, stream: tar.stdout, done: tar.done, cancel: () => tar.kill() };
  } catch (err) {
    const told = inContainerTerms(err, fs);
    release();
    throw told;
  }
}
