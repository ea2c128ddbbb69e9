import { posix } from 'node:path';

/** The largest file kept by name (a Dockerfile or an ignore file is far smaller). */
const KEEP_UP_TO = 1024 * 1024;

/** A path's top-level name in the context (`./Dockerfile` is `Dockerfile`); undefined for a deeper path. */
export function topLevelName(path: string): string | undefined {
  const clean = posix.normalize(`/${path}`).slice(1);
  if (!clean || clean === '.' || clean.includes('/')) return undefined;
  return clean;
}

/**
 * The small files of a context the builder reads by name (the Dockerfile and the ignore files),
 * kept from the extraction so that they are not read back from disk after the last byte. Only
 * top-level names (no directory on the way that could be a link): for each, what the archive
 * left there is known: a regular file's content, or nothing at all when no member had the name.
 */
export class NamedFiles {
  private readonly contents = new Map<string, Buffer>();
  /** The wanted names some member was, or was below (what is there now is not a kept file). */
  private readonly touched = new Set<string>();
  private readonly wanted = new Set<string>();

  constructor(paths: Iterable<string>) {
    for (const p of paths) {
      const name = topLevelName(p);
      if (name) this.wanted.add(name);
    }
  }

  /**
   * A member at `rel` is being made (replacing whatever was there): whether its content is to
   * be kept (a regular file of a wanted name, small enough).
   */
  member(rel: string, type: string, size: number): boolean {
    const slash = rel.indexOf('/');
    const name = slash < 0 ? rel : rel.slice(0, slash);
    if (!this.wanted.has(name)) return false;
    this.touched.add(name);
    this.contents.delete(name);
    return slash < 0 && type === 'file' && size <= KEEP_UP_TO;
  }

  /** The whole content of a kept file, once its member is complete. */
  keep(rel: string, content: Buffer): void {
    this.contents.set(rel, content);
  }

  /**
   * What is known of `path` in the context without looking: its content (a regular file),
   * null (nothing there), or undefined (not known: look on disk).
   */
  lookup(path: string): Buffer | null | undefined {
    const name = topLevelName(path);
    if (!name || !this.wanted.has(name)) return undefined;
    const content = this.contents.get(name);
    if (content) return content;
    return this.touched.has(name) ? undefined : null;
  }
}
