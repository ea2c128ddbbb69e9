import { join } from 'node:path';
import type { Logger } from '../../common/log.js';
import { KeyedMutex } from '../../common/mutex.js';
import { JsonRecordStore } from '../storage/metadata.store.js';
import { hex } from './image.store.js';

/** One compressed form of a layer and the repositories known to hold it. */
export interface CompressedLayer {
  /** Digest of the compressed blob. */
  digest: string;
  size: number;
  mediaType: string;
  /** Fully qualified repositories (`127.0.0.1:5000/bb`) the blob was pulled from or pushed to. */
  repositories: string[];
}

/** The record of one diff ID (`image/distribution/layers/<diff-hex>.json`). */
interface LayerDigestsRecord {
  diffId: string;
  blobs: CompressedLayer[];
}

/** Repositories remembered per blob (the newest kept), as moby bounds its v2 metadata. */
const MAX_REPOSITORIES = 50;

/**
 * What the engine knows of a layer's compressed forms (moby's v2metadata-by-diffid): for a diff
 * ID, the digests of the blobs it was pulled as or pushed as, and the repositories they are in.
 * Push asks it for the digest to check (HEAD) before compressing anything, and for the
 * repositories of the same registry to mount the blob from; pull and push record what they
 * moved. Records only ever describe blobs elsewhere, so garbage collection need not know them.
 */
export class LayerDigests {
  private readonly records: JsonRecordStore<LayerDigestsRecord>;
  private readonly locks = new KeyedMutex();

  constructor(dataRoot: string, log: Logger) {
    this.records = new JsonRecordStore(join(dataRoot, 'image', 'distribution', 'layers'), (key, err) =>
      log.warn('unreadable layer digests record', { key, error: String(err) }),
    );
  }

  init(): Promise<void> {
    return this.records.init();
  }

  /** The known compressed forms of `diffId`, most recently recorded first. */
  async get(diffId: string): Promise<CompressedLayer[]> {
    return (await this.records.get(hex(diffId)))?.blobs ?? [];
  }

  /** The known compressed form with this digest, if any. */
  async find(diffId: string, digest: string): Promise<CompressedLayer | undefined> {
    return (await this.get(diffId)).find((b) => b.digest === digest);
  }

  /** Record that `blob` of layer `diffId` is in `repository` (when given). */
  async add(
    diffId: string,
    blob: { digest: string; size: number; mediaType: string },
    repository?: string,
  ): Promise<void> {
    await this.locks.run(diffId, async () => {
      const blobs = await this.get(diffId);
      const old = blobs.find((b) => b.digest === blob.digest);
      const repositories = (old?.repositories ?? []).filter((r) => r !== repository);
      if (repository) repositories.unshift(repository);
      const entry: CompressedLayer = { ...blob, repositories: repositories.slice(0, MAX_REPOSITORIES) };
      const rest = blobs.filter((b) => b.digest !== blob.digest);
      await this.records.put(hex(diffId), { diffId, blobs: [entry, ...rest] });
    });
  }

  /** Forget that `digest` is in `repository` (a mount from it failed). */
  async forgetRepository(diffId: string, digest: string, repository: string): Promise<void> {
    await this.locks.run(diffId, async () => {
      const blobs = await this.get(diffId);
      const b = blobs.find((x) => x.digest === digest);
      if (!b?.repositories.includes(repository)) return;
      b.repositories = b.repositories.filter((r) => r !== repository);
      await this.records.put(hex(diffId), { diffId, blobs });
    });
  }
}
