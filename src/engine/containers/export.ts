import { readdir } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { tarDirectory } from '../storage/adapters/host.ops.js';
import { type Container, emit, type Internals } from './container.js';
import { borrowRootfs } from './rootfs.js';

/**
 * docker export: the container's filesystem (image and writable layer, no volumes or binds) as an
 * uncompressed tar, member names without `./` as dockerd's (borrowRootfs: a stopped container is
 * mounted for the export). Emits `export`.
 */
export async function exportContainer(
  ix: Internals,
  c: Container,
): Promise<{ stream: Readable; done: Promise<void>; cancel(): void }> {
  const { dir, release } = await borrowRootfs(ix, c);
  let tar: ReturnType<typeof tarDirectory>;
  try {
    const members = (await readdir(dir)).sort();
    tar = tarDirectory(dir, members.length ? members : ['.']);
  } catch (err) {
    release();
    throw err;
  }
  tar.done.then(release, release);
  tar.stdout.on('close', release);
  emit(ix, c, 'export');
  return { stream: tar.stdout, done: tar.done, cancel: () => tar.kill() };
}
