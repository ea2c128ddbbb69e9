import { existsSync, type FSWatcher, watch } from 'node:fs';
import { join } from 'node:path';
import { readdir } from '../../../common/fs/quick.js';

/** Container ids as they appear as exit file names (conmon's temp files carry a `.XXXXXX` suffix). */
const idName = /^[A-Za-z0-9_-]+$/;

/**
 * Watches conmon's exit directory (inotify through fs.watch): conmon writes `<exit-dir>/<id>`
 * (temp file + rename) when a container's process has ended. No polling.
 */
export class ExitWatcher {
  private watcher: FSWatcher | null = null;

  constructor(
    private readonly dir: string,
    private readonly onExit: (id: string) => void,
  ) {}

  start(): void {
    this.watcher = watch(this.dir, { persistent: false }, (_event, filename) => {
      const name = filename?.toString();
      // an exit file removed (the container deleted) is no exit
      if (name && idName.test(name) && existsSync(join(this.dir, name))) this.onExit(name);
    });
    this.watcher.on('error', () => {
      // the directory went away; nothing more to watch
    });
  }

  /** Ids that have an exit file now. */
  async list(): Promise<string[]> {
    try {
      return (await readdir(this.dir)).filter((n) => idName.test(n));
    } catch {
      return [];
    }
  }

  close(): void {
    this.watcher?.close();
    this.watcher = null;
  }
}
