import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { HostConfig } from '../../common/docker-types.js';
import { errnoCode } from '../../common/errors.js';
import { writeJsonAtomic } from '../../common/fs/atomic.js';
import type { Logger } from '../../common/log.js';
import type { ContainerRecord } from './types.js';

/**
 * On-disk container metadata: `<root>/<id>/config.v2.json` (record and state) and
 * `<root>/<id>/hostconfig.json`, each written atomically. The directory also holds the container's
 * hosts, hostname, resolv.conf and log files.
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
    if (hostConfig) await writeJsonAtomic(join(dir, 'hostconfig.json'), hostConfig);
    await writeJsonAtomic(join(dir, 'config.v2.json'), record);
  }

  async remove(id: string): Promise<void> {
    await rm(this.dir(id), { recursive: true, force: true });
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
      try {
        const record = JSON.parse(
          await readFile(join(this.dir(id), 'config.v2.json'), 'utf8'),
        ) as ContainerRecord;
        let hostConfig: HostConfig = {};
        try {
          hostConfig = JSON.parse(
            await readFile(join(this.dir(id), 'hostconfig.json'), 'utf8'),
          ) as HostConfig;
        } catch (err) {
          if (errnoCode(err) !== 'ENOENT') throw err;
        }
        out.push({ record, hostConfig });
      } catch (err) {
        this.log.warn('skipping unreadable container metadata', { id, error: String(err) });
      }
    }
    return out;
  }
}
