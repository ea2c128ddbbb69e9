import { join } from 'node:path';
import { errnoCode, invalidParameter } from '../../common/errors.js';
import { type Durability, fsyncDir, writeJsonAtomic } from '../../common/fs/atomic.js';
import { mkdir, readdir, readFile, rm } from '../../common/fs/quick.js';

const KEY = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/**
 * One JSON file per record under a directory, written atomically (temp, fsync, rename: one fsync
 * a put; a delete fsyncs the directory).
 * A record either exists whole or not at all: its file is the commit point of whatever it
 * describes. Unparseable files (impossible with atomic writes, but disks lie) are skipped and
 * reported through `onCorrupt`.
 */
export class JsonRecordStore<T> {
  /** All records, loaded by init() and kept in step with every put and delete. */
  private cache: Map<string, T> | undefined;

  constructor(
    readonly dir: string,
    private readonly onCorrupt: (key: string, err: unknown) => void = () => undefined,
  ) {}

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    for (const name of await readdir(this.dir)) {
      if (name.endsWith('.tmp')) await rm(join(this.dir, name), { force: true });
    }
    const cache = new Map<string, T>();
    for (const key of await this.keysOnDisk()) {
      const v = await this.read(key);
      if (v !== undefined) cache.set(key, v);
    }
    this.cache = cache;
  }

  private file(key: string): string {
    if (!KEY.test(key)) throw invalidParameter(`invalid record key ${JSON.stringify(key)}`);
    return join(this.dir, `${key}.json`);
  }

  private async read(key: string): Promise<T | undefined> {
    try {
      return JSON.parse(await readFile(this.file(key), 'utf8')) as T;
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return undefined;
      this.onCorrupt(key, err);
      return undefined;
    }
  }

  async get(key: string): Promise<T | undefined> {
    if (this.cache) {
      this.file(key); // validates the key
      return this.cache.get(key);
    }
    return this.read(key);
  }

  /** Write a record (one fsync; `none`: the caller's own next durable write commits it). */
  async put(key: string, value: T, durability: Durability = 'file'): Promise<void> {
    await writeJsonAtomic(this.file(key), value, durability);
    this.cache?.set(key, value);
  }

  /**
   * Remove a record. `durable` (the default) fsyncs the directory, so the removal survives a power
   * loss by itself; a caller whose own next durable write commits the removal (the journal keeps
   * the order of metadata changes) passes false: a kill -9 never loses an unlink either way.
   */
  async delete(key: string, durable = true): Promise<void> {
    this.cache?.delete(key);
    await rm(this.file(key), { force: true });
    if (durable) await fsyncDir(this.dir).catch(() => undefined);
  }

  private async keysOnDisk(): Promise<string[]> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    return names.filter((n) => n.endsWith('.json')).map((n) => n.slice(0, -5));
  }

  async keys(): Promise<string[]> {
    if (this.cache) return [...this.cache.keys()];
    return this.keysOnDisk();
  }

  async all(): Promise<Map<string, T>> {
    if (this.cache) return new Map(this.cache);
    const out = new Map<string, T>();
    for (const key of await this.keysOnDisk()) {
      const v = await this.read(key);
      if (v !== undefined) out.set(key, v);
    }
    return out;
  }
}
