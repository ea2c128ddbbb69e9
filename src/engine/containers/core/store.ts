import { join } from 'node:path';
import type { HostConfig } from '../../../common/docker-types.js';
import { errnoCode } from '../../../common/errors.js';
import { writeJsonAtomic, writeTempFile } from '../../../common/fs/atomic.js';
import { mkdir, readdir, readFile, rename, rm, rmSmallTree } from '../../../common/fs/quick.js';
import type { Logger } from '../../../common/log.js';
import type { Container } from './container.js';
import type { ContainerRecord } from './record.types.js';

/**
 * On-disk container metadata: `<root>/<id>/config.v2.json` (record and state) and
 * `<root>/<id>/hostconfig.json`, each written atomically. The directory also holds the container's
 * hosts, hostname, resolv.conf and log files.
 *
 * One fsync per state change (per file written): the file's, not its directory's (as dockerd's
 * CheckpointTo). A kill -9 loses nothing written (the rename is in the page cache, which outlives
 * the process); a power loss keeps the old state or the new, never a torn file.
 */
export class ContainerStore {
  constructor(
    readonly root: string,
    private readonly log: Logger,
  ) {}

  dir(id: string): string {
    return join(this.root, id);
  }

  async init(): Promise<void> {
    await mkdir(this.root, { recursive: true, mode: 0o710 });
  }

  async save(record: ContainerRecord, hostConfig?: HostConfig): Promise<void> {
    const dir = this.dir(record.ID);
    await mkdir(dir, { recursive: true, mode: 0o710 });
    if (!hostConfig) {
      await writeJsonAtomic(join(dir, 'config.v2.json'), record, 'file');
      return;
    }
    // Both files written and fsynced at the same time; then hostconfig.json is renamed into place
    // before config.v2.json is (the journal keeps the renames' order, also across a power loss):
    // a record is never there without its HostConfig.
    const files = [join(dir, 'hostconfig.json'), join(dir, 'config.v2.json')] as const;
    const temps = await Promise.allSettled([
      writeTempFile(files[0], JSON.stringify(hostConfig)),
      writeTempFile(files[1], JSON.stringify(record)),
    ]);
    const made = temps.flatMap((t) => (t.status === 'fulfilled' ? [t.value] : []));
    try {
      for (const t of temps) if (t.status === 'rejected') throw t.reason;
      for (let i = 0; i < files.length; i++) {
        await rename(made[i] as string, files[i] as string);
      }
    } catch (err) {
      await Promise.all(made.map((t) => rm(t, { force: true })));
      throw err;
    }
  }

  /** Save a container's record (and its HostConfig when asked); nothing once it was removed. */
  async persist(c: Container, withHostConfig = false): Promise<void> {
    if (c.removed) return;
    await this.save(c.record, withHostConfig ? c.hostConfig : undefined);
  }

  /** The container's directory: its records, network files and logs (a few files, no tree). */
  async remove(id: string): Promise<void> {
    await rmSmallTree(this.dir(id));
  }

  /** All stored containers; unreadable entries are logged and skipped (never deleted). */
  async loadAll(): Promise<Array<{ record: ContainerRecord; hostConfig: HostConfig }>> {
    let entries: string[];
    try {
      entries = await readdir(this.root);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return [];
      throw err;
    }
    const out: Array<{ record: ContainerRecord; hostConfig: HostConfig }> = [];
    for (const id of entries) {
      if (!/^[a-f0-9]{64}$/.test(id)) continue;
      let text: string;
      try {
        text = await readFile(join(this.dir(id), 'config.v2.json'), 'utf8');
      } catch (err) {
        if (errnoCode(err) !== 'ENOENT') {
          this.log.warn('skipping unreadable container metadata', { id, error: String(err) });
          continue;
        }
        // a create cut short before its record was in place (temp files at most): nothing refers
        // to it, and nothing of it is kept
        this.log.info('removing what a create cut short left', { id });
        await rm(this.dir(id), { recursive: true, force: true }).catch(() => undefined);
        continue;
      }
      try {
        const record = JSON.parse(text) as ContainerRecord;
        let hostConfig: HostConfig = {};
        try {
          hostConfig = JSON.parse(
            await readFile(join(this.dir(id), 'hostconfig.json'), 'utf8'),
          ) as HostConfig;
        } catch (err) {
          if (errnoCode(err) !== 'ENOENT') throw err;
          // never written so (the record is renamed into place after it): someone removed it
          this.log.warn('container has no hostconfig.json: loaded with default settings', { id });
        }
        out.push({ record, hostConfig });
      } catch (err) {
        this.log.warn('skipping unreadable container metadata', { id, error: String(err) });
      }
    }
    return out;
  }
}
