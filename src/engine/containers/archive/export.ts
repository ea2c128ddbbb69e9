import { readdir } from 'node:fs/promises';
import type { Container } from '../core/container.js';
import type { TarStream } from './archive.host.js';
import { ContainerFs } from './container-fs.js';
import { afterRelease, borrowUntilDone, type CopyDeps } from './copy.js';
import { inContainerTerms } from './host-errors.js';

/**
 * docker export: the container's filesystem (image and writable layer, no volumes or binds) as an
 * uncompressed tar, member names without `./` as dockerd's (Rootfs.borrow: a stopped container is
 * mounted for the export). Emits `export`.
 */
export async function exportContainer(
  d: Pick<CopyDeps, 'rootfs' | 'events' | 'host'>,
  c: Container,
): Promise<{ stream: TarStream['stdout']; done: Promise<void>; cancel(): void }> {
  const { dir, release } = await borrowUntilDone(d, c);
  let tar: TarStream;
  try {
    const members = (await readdir(dir)).sort();
    tar = d.host.tar(dir, members.length ? members : ['.']);
  } catch (err) {
    await release();
    throw inContainerTerms(err, new ContainerFs(dir, c));
  }
  tar.stdout.on('close', () => void release());
  d.events.emit(c, 'export');
  return { stream: tar.stdout, done: afterRelease(tar.done, release), cancel: () => tar.kill() };
}
