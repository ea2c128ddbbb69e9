import type { Readable } from 'node:stream';

/**
 * The storage driver interface, modelled on distribution's StorageDriver. Paths are absolute
 * slash-separated keys ("/docker/registry/v2/blobs/..."); a driver maps them to its backend.
 */
export interface FileInfo {
  path: string;
  size: number;
  modTime: Date;
  isDir: boolean;
  /**
   * Changes whenever the content may have changed (inode, mtime and size for files); lets
   * callers cache small files they re-read often and revalidate them with one stat.
   */
  version?: string;
}

/** An appending writer. Nothing is visible as complete until `commit`. */
export interface FileWriter {
  /** Bytes in the file, including what was there before an append. */
  readonly size: number;
  write(chunk: Uint8Array): Promise<void>;
  /** Flush and make the content durable (fsync), then close. */
  commit(): Promise<void>;
  /** Close without committing and delete the file. */
  cancel(): Promise<void>;
  /** Flush and close without fsync (an upload chunk: durable enough against a killed process). */
  close(): Promise<void>;
}

export interface StorageDriver {
  readonly name: string;
  getContent(path: string): Promise<Buffer>;
  /** Atomically replace the content at path. */
  putContent(path: string, content: string | Uint8Array): Promise<void>;
  /** A stream of the content from `offset` to `end` (inclusive), or to the end of the file. */
  reader(path: string, offset?: number, end?: number): Promise<Readable>;
  writer(path: string, append: boolean): Promise<FileWriter>;
  stat(path: string): Promise<FileInfo>;
  /** Full paths of the direct children of a directory. */
  list(path: string): Promise<string[]>;
  /** Atomically move a file (rename on one filesystem); the destination is replaced. */
  move(source: string, dest: string): Promise<void>;
  /** Delete a file or a whole directory tree. */
  delete(path: string): Promise<void>;
  /** Depth-first walk in lexical order; `fn` returning 'skip' does not descend into a directory. */
  // biome-ignore lint/suspicious/noConfusingVoidType: callbacks that return nothing are the common case.
  walk(path: string, fn: (info: FileInfo) => Promise<void | 'skip'> | void | 'skip'): Promise<void>;
  /**
   * Delete the temporary files of writes a killed process never finished (never listed, never
   * served) that were last modified before `before` (epoch ms), and the directories that leaves
   * empty below their collection (a blob directory, a link's directory). With `dryRun` nothing
   * is deleted; an aborted `signal` ends the walk early. Returns their storage paths. Drivers
   * without temporary files leave it out.
   */
  sweepTemporary?(before: number, dryRun?: boolean, signal?: AbortSignal): Promise<string[]>;
}

/** The path does not exist (distribution's PathNotFoundError). */
export class PathNotFoundError extends Error {
  constructor(readonly path: string) {
    super(`path not found: ${path}`);
    this.name = 'PathNotFoundError';
  }
}

export function isPathNotFound(err: unknown): err is PathNotFoundError {
  return err instanceof PathNotFoundError;
}

/** Storage keys are absolute, '/'-separated, without '..' or empty components. */
export function checkStoragePath(path: string): void {
  if (!path.startsWith('/') || path.includes('//') || path.split('/').some((c) => c === '..' || c === '.')) {
    throw new Error(`invalid storage path ${JSON.stringify(path)}`);
  }
}
