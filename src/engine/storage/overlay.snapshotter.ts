import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readdirSync, rmdirSync } from 'node:fs';
import { chmod } from 'node:fs/promises';
import { dirname, join, posix } from 'node:path';
import type { Readable } from 'node:stream';
import { conflict, errnoCode, invalidParameter, notFound } from '../../common/errors.js';
import { diskUsage } from '../../common/fs/disk-usage.js';
import {
  mkdir,
  readdir,
  readFile,
  readlink,
  rename,
  rm,
  rmSmallTree,
  symlink,
  writeFile,
} from '../../common/fs/quick.js';
import type { Logger } from '../../common/log.js';
import { KeyedMutex } from '../../common/mutex.js';
import type { StorageOps } from './adapters/host.ops.js';
import type { BlobWriter } from './content.store.js';
import { applyLayer, type Compression, type LayerProducer } from './layer.apply.js';
import { exportDiff } from './layer.export.js';
import { JsonRecordStore } from './metadata.store.js';
import type { InitEntry, SnapshotPaths, Snapshotter, SnapshotterExtras } from './snapshotter.types.js';
import { rebuildTar } from './tar-split.js';

/** A read-only layer snapshot, keyed by chain ID. Its record file is the commit point. */
export interface LayerRecord {
  chainId: string;
  diffId: string;
  /** Chain ID of the layer below, null for a base layer. */
  parent: string | null;
  /** Regular file bytes of this layer alone. */
  size: number;
  /** The layer blob as received (in the content store), when kept. */
  blob?: { digest: string; size: number; compression: Compression };
  /** Bytes of the uncompressed layer tarball (save writes it without counting first). */
  tarSize?: number;
  /** Short link name under overlay/l/. */
  link: string;
  created: string;
  /** `<id>/tar-split.gz` holds the record that rebuilds the layer's exact tarball (tar-split.ts). */
  tarSplit?: boolean;
}

/** A writable snapshot (a container's layer), keyed by the caller's key. */
export interface ActiveRecord {
  key: string;
  parent: string | null;
  /**
   * Its short name under `l/`: snapshots made before writable layers went without one (nothing
   * mounts a writable layer through it; an image layer's link is what a lowerdir names).
   */
  link?: string;
  /**
   * Its lowerdirs as the mount takes them (`init/<digest>:l/<link>:...`, '' for none); in its
   * `lower` file for snapshots made before the record held it.
   */
  lower?: string;
  created: string;
  /** Its init layer's directory under <root> (`init/<digest>`), shared by every snapshot made with the same entries. */
  init?: string;
}

/** A layer's tar-split record, beside its diff directory (dockerd keeps `tar-split.json.gz` in its layerdb). */
const TAR_SPLIT = 'tar-split.gz';

const KEY = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const RESERVED = new Set(['l', 'empty', 'init']);
const LINK_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** moby's overlay2 link ids: 26 base32 characters. */
function newLinkId(): string {
  const bytes = randomBytes(26);
  let s = '';
  for (const b of bytes) s += LINK_ALPHABET[b & 31];
  return s;
}

export function chainIdOf(parent: string | null, diffId: string): string {
  if (parent === null) return diffId;
  return `sha256:${createHash('sha256').update(`${parent} ${diffId}`).digest('hex')}`;
}

/** Chain IDs of a list of diff IDs, bottom first. */
export function chainIds(diffIds: string[]): string[] {
  const out: string[] = [];
  let parent: string | null = null;
  for (const d of diffIds) {
    parent = chainIdOf(parent, d);
    out.push(parent);
  }
  return out;
}

function hexOf(chainId: string): string {
  const m = /^sha256:([a-f0-9]{64})$/.exec(chainId);
  if (!m) throw invalidParameter(`invalid chain ID ${JSON.stringify(chainId)}`);
  return m[1] as string;
}

/**
 * The overlay2 layout of moby:
 *
 *   <root>/<id>/diff    the layer's files (overlay upper dir when writable)
 *   <root>/<id>/link    the short name of this layer under l/
 *   <root>/<id>/lower   `l/<link>:l/<link>...` of the layers below, top first
 *   <root>/<id>/work    overlay work dir
 *   <root>/l/<link>  -> ../<id>/diff
 *   <root>/init/<digest>  an init layer, shared by the writable snapshots made with its entries
 *
 * Layer snapshots use the chain ID's hex as <id>; writable snapshots use their key. Mounts run
 * with <root> as working directory and relative `l/<link>` lower dirs, so that even deep chains
 * fit in the one page the kernel accepts for mount options. Records (JSON, atomic) live in
 * `<metaRoot>/layers/<hex>.json` and `<metaRoot>/active/<key>.json`.
 */
export class OverlaySnapshotter implements Snapshotter, SnapshotterExtras {
  readonly root: string;
  private readonly linkDir: string;
  private readonly emptyDir: string;
  private readonly layers: JsonRecordStore<LayerRecord>;
  private readonly active: JsonRecordStore<ActiveRecord>;
  private readonly locks = new KeyedMutex();
  private readonly layerCache = new Map<string, LayerRecord>();
  private readonly initLayers = new Map<string, Promise<string>>();
  private readonly extraMountOptions: string[];

  constructor(private readonly opts: { root: string; metaRoot: string; ops: StorageOps; log: Logger }) {
    this.root = opts.root;
    this.linkDir = join(this.root, 'l');
    this.emptyDir = join(this.root, 'empty');
    const onCorrupt = (key: string, err: unknown) =>
      opts.log.warn('unreadable snapshot record', { key, error: String(err) });
    this.layers = new JsonRecordStore(join(opts.metaRoot, 'layers'), onCorrupt);
    this.active = new JsonRecordStore(join(opts.metaRoot, 'active'), onCorrupt);
    // Without the inodes index, the same lower layers can back any number of mounts.
    this.extraMountOptions = existsSync('/sys/module/overlay/parameters/index') ? ['index=off'] : [];
  }

  get ops(): StorageOps {
    return this.opts.ops;
  }

  /**
   * Create the layout and reconcile it with the records after a crash: half-extracted layers
   * (tmp-*), directories without a record, records without a directory and stale links go.
   */
  async init(): Promise<void> {
    await mkdir(this.linkDir, { recursive: true, mode: 0o700 });
    await mkdir(this.emptyDir, { recursive: true, mode: 0o755 });
    await mkdir(join(this.root, 'init'), { recursive: true, mode: 0o755 });
    for (const name of await readdir(join(this.root, 'init'))) {
      if (name.startsWith('tmp-')) await rm(join(this.root, 'init', name), { recursive: true, force: true });
    }
    await this.layers.init();
    await this.active.init();
    const layers = await this.layers.all();
    const actives = await this.active.all();
    const wanted = new Map<string, string>(); // dir name -> link
    const kept = new Set<string>(); // dir names
    for (const [hex, rec] of layers) {
      if (!existsSync(join(this.root, hex, 'diff'))) {
        this.opts.log.warn('dropping layer record without files', { chainId: rec.chainId });
        await this.layers.delete(hex);
        continue;
      }
      wanted.set(hex, rec.link);
      kept.add(hex);
      this.layerCache.set(rec.chainId, rec);
    }
    for (const [key, rec] of actives) {
      if (!existsSync(join(this.root, key, 'diff'))) {
        this.opts.log.warn('dropping snapshot record without files', { key });
        await this.active.delete(key);
        continue;
      }
      if (rec.link) wanted.set(key, rec.link);
      kept.add(key);
    }
    for (const name of await readdir(this.root)) {
      if (RESERVED.has(name) || kept.has(name)) continue;
      this.opts.log.info('removing orphaned snapshot directory', { name });
      await this.removeDir(join(this.root, name));
    }
    const links = new Set<string>();
    for (const name of await readdir(this.linkDir)) {
      const target = await readlink(join(this.linkDir, name)).catch(() => '');
      const m = /^\.\.\/([^/]+)\/diff$/.exec(target);
      if (!m || wanted.get(m[1] as string) !== name) {
        await rm(join(this.linkDir, name), { force: true });
        continue;
      }
      links.add(name);
    }
    for (const [id, link] of wanted) {
      if (!links.has(link)) await symlink(`../${id}/diff`, join(this.linkDir, link));
    }
  }

  // ---- layers ----

  /**
   * The exact tarball a layer was made from, rebuilt from its tar-split record and its files;
   * undefined when it has no record (a layer made before records were kept). Not checked here:
   * the caller hashes it against the diff ID.
   */
  rebuiltTar(layer: LayerRecord): AsyncGenerator<Buffer> | undefined {
    if (!layer.tarSplit) return undefined;
    const dir = join(this.root, hexOf(layer.chainId));
    return (async function* () {
      yield* rebuildTar(await readFile(join(dir, TAR_SPLIT)), join(dir, 'diff'));
    })();
  }

  async getLayer(chainId: string): Promise<LayerRecord | undefined> {
    const cached = this.layerCache.get(chainId);
    if (cached) return cached;
    const rec = await this.layers.get(hexOf(chainId));
    if (rec) this.layerCache.set(chainId, rec);
    return rec;
  }

  async hasLayer(chainId: string): Promise<boolean> {
    return (await this.getLayer(chainId)) !== undefined;
  }

  async listLayers(): Promise<LayerRecord[]> {
    return [...(await this.layers.all()).values()];
  }

  /** The chain from `chainId` down to its base layer (top first). NotFound when a link is missing. */
  async chain(chainId: string): Promise<LayerRecord[]> {
    const out: LayerRecord[] = [];
    let cur: string | null = chainId;
    for (let guard = 0; cur !== null && guard < 1000; guard++) {
      const rec: LayerRecord | undefined = await this.getLayer(cur);
      if (!rec) throw notFound(`layer ${cur} does not exist`);
      out.push(rec);
      cur = rec.parent;
    }
    return out;
  }

  /**
   * Unpack a layer tarball on top of `parent` and commit it under its chain ID. When that layer
   * exists already the new files are thrown away and the existing record is answered.
   */
  async applyLayer(
    parent: string | null | Promise<string | null>,
    input: AsyncIterable<Buffer> | Readable | LayerProducer,
    options: {
      blob?: BlobWriter;
      onProgress?: (rawBytes: number) => void;
      /** The diff ID the layer must have (a pull knows it from the image config). */
      expectDiffId?: string;
      /** Called under the layer's lock once it exists (new or found), before anyone can remove it. */
      onCommit?: (chainId: string) => void;
      /** The input's size when known (a pulled blob's): a large layer unpacks on a worker thread. */
      sizeHint?: number;
    } = {},
  ): Promise<{ layer: LayerRecord; created: boolean }> {
    // A parent given as a promise (a pull unpacking layers side by side) must exist only at commit.
    if (typeof parent === 'string' && !(await this.hasLayer(parent)))
      throw notFound(`parent layer ${parent} does not exist`);
    const tmp = join(this.root, `tmp-${randomBytes(8).toString('hex')}`);
    await mkdir(join(tmp, 'diff'), { recursive: true, mode: 0o755 });
    try {
      const applied = await applyLayer({
        input,
        dir: join(tmp, 'diff'),
        ops: this.opts.ops,
        blob: options.blob,
        onProgress: options.onProgress,
        sizeHint: options.sizeHint,
      });
      if (options.expectDiffId !== undefined && options.expectDiffId !== applied.diffId)
        throw invalidParameter("layers from manifest don't match image configuration");
      let blob: LayerRecord['blob'];
      if (options.blob) {
        const digest = await options.blob.commit();
        blob = { digest, size: options.blob.size, compression: applied.compression };
      }
      const parentId = await parent;
      if (parentId !== null && !(await this.hasLayer(parentId)))
        throw notFound(`parent layer ${parentId} does not exist`);
      const chainId = chainIdOf(parentId, applied.diffId);
      return await this.locks.run(chainId, async () => {
        const existing = await this.getLayer(chainId);
        if (existing) {
          options.onCommit?.(chainId);
          await this.removeDir(tmp);
          return { layer: existing, created: false };
        }
        const hex = hexOf(chainId);
        const link = newLinkId();
        await writeFile(join(tmp, 'link'), link);
        if (parentId !== null) await writeFile(join(tmp, 'lower'), await this.lowerOf(parentId));
        if (applied.tarSplit) await writeFile(join(tmp, TAR_SPLIT), applied.tarSplit);
        await mkdir(join(tmp, 'work'), { mode: 0o700 });
        await rm(join(this.root, hex), { recursive: true, force: true });
        await rename(tmp, join(this.root, hex));
        await rm(join(this.linkDir, link), { force: true });
        await symlink(`../${hex}/diff`, join(this.linkDir, link));
        const layer: LayerRecord = {
          chainId,
          diffId: applied.diffId,
          parent: parentId,
          size: applied.size,
          tarSize: applied.tarSize,
          link,
          created: new Date().toISOString(),
        };
        if (blob) layer.blob = blob;
        if (applied.tarSplit) layer.tarSplit = true;
        options.onCommit?.(chainId);
        await this.layers.put(hex, layer);
        this.layerCache.set(chainId, layer);
        return { layer, created: true };
      });
    } catch (err) {
      await options.blob?.abort().catch(() => undefined);
      await this.removeDir(tmp).catch(() => undefined);
      throw err;
    }
  }

  /**
   * Remove a layer snapshot. Refuses while a layer or writable snapshot sits on it. `keep` is
   * asked under the layer's lock (a layer an import just pinned stays). Answers whether it went.
   */
  async removeLayer(chainId: string, keep?: () => boolean): Promise<boolean> {
    return this.locks.run(chainId, async () => {
      const rec = await this.getLayer(chainId);
      if (!rec || keep?.()) return false;
      for (const other of this.layerCache.values()) {
        if (other.parent === chainId) throw conflict(`layer ${chainId} has dependent layers`);
      }
      for (const a of (await this.active.all()).values()) {
        if (a.parent === chainId) throw conflict(`layer ${chainId} is used by snapshot ${a.key}`);
      }
      const hex = hexOf(chainId);
      await this.layers.delete(hex);
      this.layerCache.delete(chainId);
      await rm(join(this.linkDir, rec.link), { force: true });
      await this.removeDir(join(this.root, hex));
      return true;
    });
  }

  /** `l/<link>:...` of `chainId` and everything below it (the lower dirs of a snapshot on top of it). */
  private async lowerOf(chainId: string): Promise<string> {
    const chain = await this.chain(chainId);
    return chain.map((l) => `l/${l.link}`).join(':');
  }

  /** Inspect's GraphDriver.Data for an image whose top layer is `chainId`. */
  async layerPaths(chainId: string): Promise<SnapshotPaths> {
    const chain = await this.chain(chainId);
    const top = join(this.root, hexOf(chainId));
    const paths: SnapshotPaths = {
      MergedDir: join(top, 'merged'),
      UpperDir: join(top, 'diff'),
      WorkDir: join(top, 'work'),
    };
    if (chain.length > 1)
      paths.LowerDir = chain
        .slice(1)
        .map((l) => join(this.root, hexOf(l.chainId), 'diff'))
        .join(':');
    return paths;
  }

  // ---- writable snapshots ----

  private checkKey(key: string): void {
    if (!KEY.test(key) || RESERVED.has(key) || key.startsWith('tmp-')) {
      throw invalidParameter(`invalid snapshot key ${JSON.stringify(key)}`);
    }
  }

  private dirOf(key: string): string {
    this.checkKey(key);
    return join(this.root, key);
  }

  async prepare(
    key: string,
    parentChainId: string | null,
    opts: { init?: readonly InitEntry[]; durable?: boolean } = {},
  ): Promise<void> {
    const dir = this.dirOf(key);
    await this.locks.run(`active:${key}`, async () => {
      const existing = await this.active.get(key);
      if (existing) {
        if (existing.parent === parentChainId) return;
        throw conflict(`snapshot ${key} already exists`);
      }
      if (/^[a-f0-9]{64}$/.test(key) && (await this.layers.get(key))) {
        throw conflict(`snapshot key ${key} is a layer`);
      }
      let lower = parentChainId === null ? '' : await this.lowerOf(parentChainId);
      const init = opts.init?.length ? await this.initLayer(opts.init) : undefined;
      // the init layer is the writable layer's first lower (paths relative to the root, as the mount's)
      if (init) lower = lower ? `${init}:${lower}` : init;
      if (existsSync(dir)) await rm(dir, { recursive: true, force: true });
      await mkdir(dir, { mode: 0o700 });
      // no `link`, `lower` or `l/` entry of its own: nothing names a writable layer as a lowerdir,
      // and its lowerdirs are in its record
      await Promise.all([
        mkdir(join(dir, 'diff'), { mode: 0o755 }),
        mkdir(join(dir, 'work'), { mode: 0o700 }),
      ]);
      const rec: ActiveRecord = { key, parent: parentChainId, lower, created: new Date().toISOString() };
      if (init) rec.init = init;
      await this.active.put(key, rec, opts.durable === false ? 'none' : 'file');
    });
  }

  /**
   * The init layer holding `entries`: `init/<digest of the entries>` under the root, written once
   * (into a temporary directory, then renamed) and shared read-only by every snapshot made with
   * the same entries, so that a container's creation writes none of it.
   */
  private initLayer(entries: readonly InitEntry[]): Promise<string> {
    const relative = entries.map(initEntryPath);
    const name = `init/${createHash('sha256').update(JSON.stringify(relative)).digest('hex').slice(0, 32)}`;
    let made = this.initLayers.get(name);
    if (!made) {
      made = (async () => {
        const dir = join(this.root, name);
        if (existsSync(dir)) return name;
        const tmp = join(this.root, 'init', `tmp-${randomBytes(8).toString('hex')}`);
        try {
          await writeInitLayer(tmp, relative);
          await rename(tmp, dir);
        } catch (err) {
          await rm(tmp, { recursive: true, force: true });
          if (!existsSync(dir)) throw err;
        }
        return name;
      })();
      made.catch(() => this.initLayers.delete(name));
      this.initLayers.set(name, made);
    }
    return made;
  }

  async exists(key: string): Promise<boolean> {
    this.checkKey(key);
    return (await this.active.get(key)) !== undefined;
  }

  async listActive(): Promise<ActiveRecord[]> {
    return [...(await this.active.all()).values()];
  }

  async mount(key: string, target: string, options: { readonly?: boolean } = {}): Promise<void> {
    const dir = this.dirOf(key);
    const rec = await this.active.get(key);
    if (!rec) throw notFound(`snapshot ${key} does not exist`);
    const lowerText = rec.lower ?? (await readFile(join(dir, 'lower'), 'utf8').catch(() => ''));
    const lowers = lowerText.trim() ? lowerText.trim().split(':') : [];
    await mkdir(target, { recursive: true });
    if (options.readonly) {
      const lowerdirs = [`${key}/diff`, ...lowers];
      if (lowerdirs.length < 2) lowerdirs.push('empty');
      await this.opts.ops.mountOverlay({
        cwd: this.root,
        lowerdirs,
        target,
        extraOptions: this.extraMountOptions,
      });
      return;
    }
    await this.opts.ops.mountOverlay({
      cwd: this.root,
      lowerdirs: lowers.length ? lowers : ['empty'],
      upperdir: `${key}/diff`,
      workdir: `${key}/work`,
      target,
      extraOptions: this.extraMountOptions,
    });
  }

  async unmount(target: string): Promise<void> {
    await this.opts.ops.unmount(target);
  }

  /**
   * Remove a writable snapshot. The record goes first (a crash after it leaves only a directory);
   * so a removal that failed on the directory (a file it could not delete) is finished by the
   * next one, which finds the directory without its record.
   */
  async remove(key: string): Promise<void> {
    const dir = this.dirOf(key);
    await this.locks.run(`active:${key}`, async () => {
      const rec = await this.active.get(key);
      if (!rec) {
        if (existsSync(dir)) await this.removeDir(dir);
        return;
      }
      // not fsynced: the removal of a container's snapshot is committed by its owner's next
      // durable change (a container's record goes after it); lost to a power loss, the record
      // comes back with the owner's, which the next start removes again
      await this.active.delete(key, false);
      if (rec.link) await rm(join(this.linkDir, rec.link), { force: true });
      if (!removeUntouched(dir)) await this.removeDir(dir);
    });
  }

  diff(key: string): Readable {
    return exportDiff(join(this.dirOf(key), 'diff'), this.opts.ops);
  }

  /** Whether a writable snapshot changed nothing (its upper directory is empty: diff() is an empty layer). */
  async diffIsEmpty(key: string): Promise<boolean> {
    return (await readdir(join(this.dirOf(key), 'diff'))).length === 0;
  }

  async usage(key: string): Promise<number> {
    return diskUsage(join(this.dirOf(key), 'diff'));
  }

  /** The writable layer's directory (tests). */
  upperDir(key: string): string {
    return join(this.dirOf(key), 'diff');
  }

  async paths(key: string): Promise<SnapshotPaths> {
    const dir = this.dirOf(key);
    const rec = await this.active.get(key);
    if (!rec) throw notFound(`snapshot ${key} does not exist`);
    const paths: SnapshotPaths = {
      MergedDir: join(dir, 'merged'),
      UpperDir: join(dir, 'diff'),
      WorkDir: join(dir, 'work'),
    };
    const lowers: string[] = [];
    if (rec.init) lowers.push(join(this.root, rec.init));
    if (rec.parent !== null) {
      const chain = await this.chain(rec.parent);
      lowers.push(...chain.map((l) => join(this.root, hexOf(l.chainId), 'diff')));
    }
    if (lowers.length) paths.LowerDir = lowers.join(':');
    return paths;
  }

  /** rm -rf, after unmounting anything still mounted below (never delete through a mount). */
  private async removeDir(dir: string): Promise<void> {
    const mounts = await readFile('/proc/self/mountinfo', 'utf8').catch(() => '');
    const below = mounts
      .split('\n')
      .map((l) => (l.split(' ')[4] ?? '').replace(/\\040/g, ' '))
      .filter((t) => t === dir || t.startsWith(`${dir}/`))
      .sort((a, b) => b.length - a.length);
    for (const t of below) await this.opts.ops.unmount(t);
    // a snapshot whose writable layer stayed empty (a container that wrote nothing) is a handful
    // of entries: removed at once; a layer with content in the thread pool
    if (isEmptyDir(join(dir, 'diff'))) await rmSmallTree(dir);
    else await rm(dir, { recursive: true, force: true });
  }
}

/**
 * A writable snapshot that nothing wrote to and nothing is mounted on (a container that ran and
 * wrote nothing: the usual removal) is its empty directories: removed leaf first with rmdir alone,
 * which never goes through a mount (a mountpoint is EBUSY) and never takes content (ENOTEMPTY),
 * without reading the host's mount table or any directory. `merged` goes first, so that a
 * snapshot still mounted is left untouched. False when any of them is not so: what is left is for
 * removeDir.
 */
function removeUntouched(dir: string): boolean {
  for (const sub of ['merged', 'diff', 'work/work', 'work', '']) {
    try {
      rmdirSync(sub ? join(dir, sub) : dir);
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT') return false;
    }
  }
  return true;
}

function isEmptyDir(dir: string): boolean {
  try {
    return readdirSync(dir).length === 0;
  } catch {
    return false;
  }
}

/** An init entry with its path made relative (and checked to stay inside the layer). */
function initEntryPath(e: InitEntry): InitEntry {
  const rel = posix.normalize(`/${e.path}`).slice(1);
  if (rel === '' || rel.split('/').includes('..') || e.path.split('/').includes('..')) {
    throw invalidParameter(`init layer entry outside the layer: ${e.path}`);
  }
  return { ...e, path: rel };
}

/** A snapshot's init layer: its entries (relative paths), parents made as 0755 directories. */
async function writeInitLayer(dir: string, entries: readonly InitEntry[]): Promise<void> {
  await mkdir(dir, { mode: 0o755 });
  for (const e of entries) {
    const path = join(dir, e.path);
    await mkdir(dirname(path), { recursive: true, mode: 0o755 });
    if (e.type === 'dir') await mkdir(path, { recursive: true, mode: e.mode ?? 0o755 });
    else if (e.type === 'symlink') await symlink(e.target ?? '', path);
    else await writeFile(path, '', { mode: e.mode ?? 0o755 });
    if (e.type !== 'symlink' && e.mode !== undefined) await chmod(path, e.mode);
  }
}
