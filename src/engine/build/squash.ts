import { randomBytes } from 'node:crypto';
import type { Stats } from 'node:fs';
import {
  chmod,
  copyFile,
  lchown,
  lstat,
  lutimes,
  mkdir,
  readdir,
  readlink,
  rm,
  symlink,
} from 'node:fs/promises';
import { join } from 'node:path';
import type { ImageConfigFile } from '../../common/docker-types.js';
import { notFound } from '../../common/errors.js';
import type { BuildImagePort } from './builder.ports.js';
import { ImageRoots } from './image-roots.js';

type History = NonNullable<ImageConfigFile['history']>[number];

const sameEntry = (a: Stats, b: Stats): boolean =>
  a.mode === b.mode && a.uid === b.uid && a.gid === b.gid && a.size === b.size && a.mtimeMs === b.mtimeMs;

/** Owner, mode and times of `path` as `st` has them (links: owner and times only). */
async function settle(path: string, st: Stats): Promise<void> {
  await lchown(path, st.uid, st.gid);
  if (!st.isSymbolicLink()) await chmod(path, st.mode & 0o7777);
  await lutimes(path, st.atime, st.mtime);
}

/**
 * Make the tree at `dst` (a writable overlay of the base) what `src` (the built image's files) is:
 * entries that `src` lacks removed (the overlay records whiteouts), those that differ in kind,
 * mode, owner, size or time written again. Nothing is followed: links are read and made as links.
 */
async function syncTree(src: string, dst: string): Promise<void> {
  const have = new Set(await readdir(dst).catch(() => [] as string[]));
  const want = await readdir(src);
  const wanted = new Set(want);
  for (const name of have) if (!wanted.has(name)) await rm(join(dst, name), { recursive: true, force: true });
  for (const name of want) {
    const from = join(src, name);
    const to = join(dst, name);
    const s = await lstat(from);
    const d = have.has(name) ? await lstat(to) : undefined;
    if (s.isDirectory()) {
      if (d && !d.isDirectory()) await rm(to, { recursive: true, force: true });
      if (!d?.isDirectory()) await mkdir(to);
      await syncTree(from, to);
      await settle(to, s);
      continue;
    }
    if (d && !d.isDirectory() && sameEntry(s, d)) {
      if (!s.isSymbolicLink() || (await readlink(from)) === (await readlink(to))) continue;
    }
    if (d) await rm(to, { recursive: true, force: true });
    if (s.isSymbolicLink()) await symlink(await readlink(from), to);
    else if (s.isFile()) await copyFile(from, to);
    else continue; // devices, sockets and fifos are not kept by a squash
    await settle(to, s);
  }
}

/**
 * Experimental `squash`, as dockerd's SquashImage: the built image's files as one layer on the
 * last stage's base image, its config kept, its history the base's, then the squashed steps (as
 * empty layers), then `merge <image> to <base>`.
 */
export async function squashImage(
  images: BuildImagePort,
  workDir: string,
  imageId: string,
  base: { imageId: string; chainId: string | null },
): Promise<string> {
  const img = await images.get(imageId);
  if (!img) throw notFound(`No such image: ${imageId}`);
  const baseImg = base.imageId ? await images.get(base.imageId) : undefined;
  const snapshots = images.snapshotter;
  const roots = new ImageRoots(snapshots, workDir);
  const key = `build-squash-${randomBytes(16).toString('hex')}`;
  const dir = join(workDir, `squash-${randomBytes(6).toString('hex')}`);
  let mounted = false;
  try {
    await snapshots.prepare(key, base.chainId);
    await mkdir(dir, { recursive: true });
    await snapshots.mount(key, dir);
    mounted = true;
    await syncTree(await roots.root(img.chainId), dir);
    await snapshots.unmount(dir);
    mounted = false;
    const committed = await images.commit({
      key,
      ...(base.imageId ? { parentImageId: base.imageId } : {}),
      containerId: '',
      containerConfig: img.config.container_config ?? {},
      config: img.config.config ?? {},
    });
    const made = await images.get(committed);
    if (!made) throw notFound(`No such image: ${committed}`);
    const baseHistory = baseImg?.config.history ?? [];
    const squashed: History[] = (img.config.history ?? [])
      .slice(baseHistory.length)
      .map((h) => ({ ...h, empty_layer: true }));
    const merge: History = {
      created: made.config.created ?? new Date().toISOString(),
      comment: base.imageId ? `merge ${imageId} to ${base.imageId}` : `create new from ${imageId}`,
    };
    const config: ImageConfigFile = { ...made.config, history: [...baseHistory, ...squashed, merge] };
    const id = await images.createImage(config, { parent: base.imageId });
    if (id !== committed)
      await images.remove(committed, { force: false, prune: false }).catch(() => undefined);
    return id;
  } finally {
    if (mounted) await snapshots.unmount(dir).catch(() => undefined);
    await snapshots.remove(key).catch(() => undefined);
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
    await roots.release();
  }
}
