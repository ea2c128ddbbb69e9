import type { Readable } from 'node:stream';

/** A tar being written by the host's tar (export, docker cp out). */
export interface TarStream {
  stdout: Readable;
  /** Resolves once tar succeeded; rejects with its error. */
  done: Promise<void>;
  kill(): void;
}

/**
 * The host calls the archive room makes (adapters/archive.adapter.ts): special files made with
 * mknod/mkfifo, overlay's opaque-directory marks read with getfattr (node has no xattr calls),
 * directory trees written by GNU tar. Unit tests pass fakes.
 */
export interface ArchiveHost {
  /** A device node; rejects with the tool's message. */
  mknod(path: string, kind: 'b' | 'c', mode: number, major: number, minor: number): Promise<void>;
  mkfifo(path: string, mode: number): Promise<void>;
  /** Remove a directory tree without following links in it (GNU rm: one file system). */
  removeTree(path: string): Promise<void>;
  /** The directories below `upper` marked opaque (`trusted.overlay.opaque=y`), as absolute paths. */
  opaqueDirs(upper: string): Promise<Set<string>>;
  /**
   * A tar of `members` of `dir`, with GNU tar's `extraArgs` (e.g. --transform); `done` rejects
   * with tar's message, which names members relative to `dir` and never `dir` itself.
   */
  tar(dir: string, members: string[], extraArgs?: string[]): TarStream;
  /**
   * The bytes of an uploaded archive, decompressed whatever its compression (none, gzip, bzip2,
   * xz, zstd), as dockerd reads PUT /containers/{id}/archive.
   */
  unpack(raw: AsyncIterable<Buffer>): AsyncIterable<Buffer>;
}
