import { createWriteStream } from 'node:fs';
import { chmod, lchown, link, lstat, lutimes, mkdir, rm, symlink } from 'node:fs/promises';
import { join, posix } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tarStream from 'tar-stream';
import { resolveInRoot } from '../runtime/oci/rootfs-path.js';

/** A member's place in the tree: its parent resolved inside `root` (links never lead out), then its name. */
async function placeOf(root: string, name: string): Promise<string> {
  const clean = posix.normalize(`/${name}`).replace(/\/+$/, '');
  return join(await resolveInRoot(root, posix.dirname(clean)), posix.basename(clean));
}

/** Owner first (a chown clears set-id bits), then mode, then times; a link's own owner and times. */
async function settle(path: string, h: tarStream.Header, isLink: boolean): Promise<void> {
  await lchown(path, h.uid ?? 0, h.gid ?? 0);
  if (!isLink) await chmod(path, (h.mode ?? 0o644) & 0o7777);
  const t = h.mtime ?? new Date();
  await lutimes(path, t, t);
}

/**
 * Write a copy's tar (the context part's makeCopyTar: rooted at `/`, directories first) into the
 * mounted filesystem of a step's writable snapshot, as dockerd's classic builder copies into a
 * layer: every member's parent resolved inside the root (a link in the image leads where it
 * leads there, never out), an existing entry replaced (a directory kept when the member is one),
 * owners and modes as the tar says, directories' times set once their members are in.
 */
export async function writeCopyTar(root: string, tar: Readable): Promise<void> {
  const extract = tarStream.extract();
  const feeding = pipeline(tar, extract);
  const dirs: Array<[string, tarStream.Header]> = [];
  try {
    for await (const entry of extract) {
      const h = entry.header;
      const clean = posix.normalize(`/${h.name}`).replace(/\/+$/, '');
      if (clean === '' || clean === '/') {
        entry.resume();
        continue;
      }
      const target = await placeOf(root, clean);
      const existing = await lstat(target).catch(() => undefined);
      if (h.type === 'directory') {
        entry.resume();
        if (existing && !existing.isDirectory()) await rm(target, { recursive: true, force: true });
        if (!existing?.isDirectory()) await mkdir(target);
        dirs.push([target, h]);
        continue;
      }
      if (existing) await rm(target, { recursive: true, force: true });
      if (h.type === 'file' || h.type === 'contiguous-file') {
        await pipeline(entry, createWriteStream(target, { mode: 0o600 }));
        await settle(target, h, false);
      } else if (h.type === 'symlink') {
        entry.resume();
        await symlink(h.linkname ?? '', target);
        await settle(target, h, true);
      } else if (h.type === 'link') {
        entry.resume();
        await link(await placeOf(root, h.linkname ?? ''), target);
      } else {
        // devices and fifos have no place in a copy
        entry.resume();
      }
    }
    await feeding;
  } catch (err) {
    extract.destroy();
    await feeding.catch(() => undefined);
    throw err;
  }
  for (const [path, h] of dirs.reverse()) await settle(path, h, false);
}
