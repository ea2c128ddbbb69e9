import { readFileSync, statSync } from 'node:fs';

/** What identifies one version of a file: its inode, size and change times (nanoseconds). */
function versionOf(path: string): string | undefined {
  const st = statSync(path, { bigint: true, throwIfNoEntry: false });
  if (!st) return undefined;
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
}

/**
 * A small text file read again only when it changed: one `stat` (at once, not through the thread
 * pool) per read, and the file itself read when its inode, size, modification or change time
 * differ from the version read last. A file replaced (a new inode, as a rename over it), edited
 * in place (mtime and ctime move) or removed is seen at the next read; a missing file reads as
 * `undefined`. For configuration files of the host that the engine reads on hot paths
 * (/etc/resolv.conf at every container start).
 */
export class StatCachedFile {
  private version: string | undefined;
  private text: string | undefined;

  constructor(
    readonly path: string,
    private readonly stat: (path: string) => string | undefined = versionOf,
    private readonly read: (path: string) => string = (p) => readFileSync(p, 'utf8'),
  ) {}

  /** The file's text as it is now; `undefined` when it is missing or unreadable. */
  current(): string | undefined {
    let version: string | undefined;
    try {
      version = this.stat(this.path);
    } catch {
      version = undefined;
    }
    if (version === undefined) {
      this.version = undefined;
      this.text = undefined;
      return undefined;
    }
    if (version === this.version) return this.text;
    try {
      const text = this.read(this.path);
      // a change that lands between the stat and the read is seen at the next read: the version
      // kept is the one stat gave before the read, never newer than the text
      this.version = version;
      this.text = text;
      return text;
    } catch {
      this.version = undefined;
      this.text = undefined;
      return undefined;
    }
  }
}
