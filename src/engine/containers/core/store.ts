import { join } from 'node:path';
import type { HostConfig } from '../../../common/docker-types.js';
import { errnoCode } from '../../../common/errors.js';
import { writeFileAtomic } from '../../../common/fs/atomic.js';
import { mkdir, readdir, readFile, rm, rmSmallTree } from '../../../common/fs/quick.js';
import type { Logger } from '../../../common/log.js';
import type { Container } from './container.js';
import type { ContainerRecord } from './record.types.js';

/**
 * On-disk container metadata: `<root>/<id>/config.v2.json` (record and state, and a copy of the
 * HostConfig) and `<root>/<id>/hostconfig.json` (dockerd's layout), each written atomically. The
 * directory also holds the container's hosts, hostname, resolv.conf and log files.
 *
 * One fsync per state change: the record's file, not its directory's (as dockerd's CheckpointTo).
 * hostconfig.json is written (when the HostConfig changed) and renamed just before the record,
 * without an fsync of its own: the record's fsync commits the journal with both renames in order,
 * and should a power loss leave hostconfig.json's content behind (written, not yet on the disk),
 * the record's copy is the HostConfig the loader takes. A kill -9 loses nothing written (the page
 * cache outlives the process); a power loss keeps the old state or the new, never a torn file.
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

  /**
   * Save a record, with its HostConfig in it when given (and then hostconfig.json rewritten too,
   * before it). One fsync: the record's. See the class comment for why that is enough.
   */
  async save(record: ContainerRecord, hostConfig?: HostConfig): Promise<void> {
    await this.write(record, hostConfig, hostConfig !== undefined);
  }

  private async write(
    record: ContainerRecord,
    hostConfig: HostConfig | undefined,
    hostConfigFile: boolean,
  ): Promise<void> {
    // the directory is made (0710) by the first write into it
    const dir = this.dir(record.ID);
    // dockerd's layout keeps the HostConfig in hostconfig.json only; here the record carries it
    // as well (the last key), so that the record alone is the commit point of a change
    let text = JSON.stringify(record);
    if (hostConfig) text = `${text.slice(0, -1)},"HostConfig":${JSON.stringify(hostConfig)}}`;
    if (hostConfigFile && hostConfig) {
      // not fsynced: renamed before the record, whose fsync commits the rename with the journal;
      // its content, should a power loss tear it, is the record's copy
      await writeFileAtomic(join(dir, 'hostconfig.json'), JSON.stringify(hostConfig), 0o644, 'none', 0o710);
    }
    await writeFileAtomic(join(dir, 'config.v2.json'), text, 0o644, 'file', 0o710);
  }

  /** Save a container's record (and its HostConfig when asked); nothing once it was removed. */
  async persist(c: Container, withHostConfig = false): Promise<void> {
    if (c.removed) return;
    await this.write(c.record, c.hostConfig, withHostConfig);
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
        const record = JSON.parse(text) as ContainerRecord & { HostConfig?: HostConfig };
        const carried = record.HostConfig;
        delete record.HostConfig;
        if (carried) {
          out.push({ record, hostConfig: carried });
          continue;
        }
        // a record written before records carried their HostConfig
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
