import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { errnoCode, invalidParameter } from '../../common/errors.js';
import { writeFileAtomic } from '../../common/fs/atomic.js';
import { KeyedMutex } from '../../common/mutex.js';

/** Where a layer's blob was seen: its (compressed) digest and the repository it came from. */
export interface LayerSource {
  /** Digest of the layer blob as the registry holds it (`sha256:...`). */
  digest: string;
  /** Full repository name (`127.0.0.1:5000/team/app`, `docker.io/library/busybox`). */
  sourceRepository: string;
}

/** The most sources kept per diff ID (dockerd keeps a bounded list too). */
const MAX_SOURCES = 50;

function hexOf(d: string): string {
  const m = /^sha256:([a-f0-9]{64})$/.exec(d);
  if (!m) throw invalidParameter(`invalid digest ${JSON.stringify(d)}`);
  return m[1] as string;
}

/**
 * The distribution metadata of layers, in dockerd's layout and format under
 * `<data-root>/image/distribution/`:
 *
 *   diffid-by-digest/sha256/<blob hex>       the diff ID (uncompressed digest) of a layer blob
 *   v2metadata-by-diffid/sha256/<diff hex>   JSON `[{"Digest","SourceRepository","HMAC"}]`: the
 *                                            blobs (and repositories) a layer was pulled from or
 *                                            pushed to
 *
 * Pull records every layer it fetches (and uses diffid-by-digest to skip a schema 1 layer it has
 * already); push reads it to skip blobs a registry has and to mount across repositories.
 */
export class DistributionMetadataStore {
  private readonly byDigest: string;
  private readonly byDiffId: string;
  private readonly locks = new KeyedMutex();

  constructor(dataRoot: string) {
    const root = join(dataRoot, 'image', 'distribution');
    this.byDigest = join(root, 'diffid-by-digest', 'sha256');
    this.byDiffId = join(root, 'v2metadata-by-diffid', 'sha256');
  }

  async init(): Promise<void> {
    await mkdir(this.byDigest, { recursive: true });
    await mkdir(this.byDiffId, { recursive: true });
  }

  /** The diff ID of the layer whose blob has `digest`, if known. */
  async diffIdOf(digest: string): Promise<string | undefined> {
    try {
      const s = (await readFile(join(this.byDigest, hexOf(digest)), 'utf8')).trim();
      return /^sha256:[a-f0-9]{64}$/.test(s) ? s : undefined;
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return undefined;
      throw err;
    }
  }

  /** The blobs and repositories the layer `diffId` is known from, most recent last. */
  async sourcesOf(diffId: string): Promise<LayerSource[]> {
    let raw: string;
    try {
      raw = await readFile(join(this.byDiffId, hexOf(diffId)), 'utf8');
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return [];
      throw err;
    }
    try {
      const list = JSON.parse(raw) as Array<{ Digest?: unknown; SourceRepository?: unknown }>;
      return list
        .filter((e) => typeof e.Digest === 'string' && typeof e.SourceRepository === 'string')
        .map((e) => ({ digest: e.Digest as string, sourceRepository: e.SourceRepository as string }));
    } catch {
      return [];
    }
  }

  /** Record that the layer `diffId` has the blob `digest` in `sourceRepository`. */
  async record(diffId: string, digest: string, sourceRepository: string): Promise<void> {
    await writeFileAtomic(join(this.byDigest, hexOf(digest)), diffId);
    await this.locks.run(diffId, async () => {
      const list = (await this.sourcesOf(diffId)).filter(
        (s) => !(s.digest === digest && s.sourceRepository === sourceRepository),
      );
      list.push({ digest, sourceRepository });
      const kept = list.slice(-MAX_SOURCES);
      await writeFileAtomic(
        join(this.byDiffId, hexOf(diffId)),
        JSON.stringify(
          kept.map((s) => ({ Digest: s.digest, SourceRepository: s.sourceRepository, HMAC: '' })),
        ),
      );
    });
  }
}
