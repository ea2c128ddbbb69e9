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
  const borrowed = await borrowUntilDone(d, c);
  const fs = new ContainerFs(borrowed.dir, c);
  let held: HeldDir | undefined;
  // the held directory first: an open descriptor in it would keep the rootfs from being unmounted
  const release = () => borrowed.release(() => held?.close());
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
    tar.stdout.on('close', () => void release());
    d.events.emit(c, 'archive-path');
    return { stat, stream: tar.stdout, done: afterRelease(tar.done, release), cancel: () => tar.kill() };
  } catch (err) {
    const told = inContainerTerms(err, fs);
    await release();
    throw told;
  }
}

/**
 * The rootfs borrowed for a tar made as it goes (GET archive, export): `release` (once, after
 * `first`) gives it back and resolves when a stopped container's rootfs, mounted for it, is
 * unmounted again (under the container's lock), so that the answer ends after that.
 */
export async function borrowUntilDone(
  d: Pick<CopyDeps, 'rootfs'>,
  c: Container,
): Promise<{ dir: string; release(first?: () => Promise<void> | undefined): Promise<void> }> {
  const mountedForUs = !c.isRunningProcess;
  const { dir, release } = await d.rootfs.borrow(c);
  let releasing: Promise<void> | undefined;
  return {
    dir,
    release(first) {
      releasing ??= (async () => {
        await first?.()?.catch(() => undefined);
        release();
        if (mountedForUs) await c.lock.run(async () => undefined);
      })();
      return releasing;
    },
  };
}

/** A tar's outcome, once the rootfs it read is given back. */
export function afterRelease(done: Promise<void>, release: () => Promise<void>): Promise<void> {
  const settled = done.then(release, async (err: unknown) => {
    await release();
    throw err;
  });
  settled.catch(() => undefined);
  return settled;
}
