import type { SharedHolds } from './holds.js';

/**
 * What keeps the serving registry and a garbage collection running inside it from racing over a
 * blob: a request that is about to rely on blobs (a manifest PUT checking and referencing them, a
 * mount linking one) holds their digests while it does; the collector deletes a blob only when
 * no request holds it and none held it since the run began, and a request that comes while the
 * blob is being deleted waits for the deletion, so that its own existence check sees the truth
 * (BLOB_UNKNOWN, and the client uploads it again) rather than a blob about to vanish.
 */
export class BlobGuard {
  /**
   * `shared`: holds written to the storage too, for collectors in other processes on the same
   * root (gc/holds.ts); without it, only this process's collections see them.
   */
  constructor(private readonly shared?: SharedHolds) {}

  private readonly held = new Map<string, number>();
  private readonly deleting = new Map<string, Promise<void>>();
  /** Digests held since the current run began (undefined: no run). */
  private touched: Set<string> | undefined;

  /** Run `fn` with the digests held. */
  async hold<T>(digests: readonly string[], fn: () => Promise<T>): Promise<T> {
    for (const d of digests) {
      this.held.set(d, (this.held.get(d) ?? 0) + 1);
      this.touched?.add(d);
    }
    let release: (() => Promise<void>) | undefined;
    try {
      release = await this.shared?.add(digests);
      await Promise.all(digests.map((d) => this.deleting.get(d)));
      return await fn();
    } finally {
      await release?.();
      for (const d of digests) {
        const n = (this.held.get(d) ?? 1) - 1;
        if (n <= 0) this.held.delete(d);
        else this.held.set(d, n);
      }
    }
  }

  /** A collection starts: from now on, every held digest is kept until `endRun`. */
  beginRun(): void {
    this.touched = new Set(this.held.keys());
  }

  endRun(): void {
    this.touched = undefined;
  }

  /**
   * Delete a blob unless a request holds it or held it during this run; true when deleted
   * (`remove` may decide against it too: false).
   */
  async tryDelete(digest: string, remove: () => Promise<unknown>): Promise<boolean> {
    if (this.held.has(digest) || this.touched?.has(digest)) return false;
    const p = remove();
    this.deleting.set(
      digest,
      p.then(
        () => undefined,
        () => undefined,
      ),
    );
    try {
      return (await p) !== false;
    } finally {
      this.deleting.delete(digest);
    }
  }
}
