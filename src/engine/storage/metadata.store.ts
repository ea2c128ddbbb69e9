import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { errnoCode, invalidParameter } from '../../common/errors.js';
import { fsyncDir, writeJsonAtomic } from '../../common/fs/atomic.js';

const KEY = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/**
 * One JSON file per record under a directory, written atomically (temp, fsync, rename, fsync dir).
 * A record either exists whole or not at all: its file is the commit point of whatever it
 * describes. Unparseable files (impossible with atomic writes, but disks lie) are skipped and
 * reported through `onCorrupt`.
 */
export class JsonRecordStore<T> {
  constructor(
    readonly dir: string,
    private readonly onCorrupt: (key: string, err: unknown) => void = () => undefined,
  ) {}

  async init(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    for (const name of await readdir(this.dir)) {
      if (name.endsWith('.tmp')) await rm(join(this.dir, name), { force: true });
    }
  }

  private file(key: string): string {
    if (!KEY.test(key)) throw invalidParameter(`invalid record key ${JSON.stringify(key)}`);
    return join(this.dir, `${key}.json`);
  }

  async get(key: string): Promise<T | undefined> {
    try {
      return JSON.parse(await readFile(this.file(key), 'utf8')) as T;
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return undefined;
      this.onCorrupt(key, err);
      return undefined;
    }
  }

  async put(key: string, value: T): Promise<void> {
    await writeJsonAtomic(this.file(key), value);
  }

  async delete(key: string): Promise<void> {
    await rm(this.file(key), { force: true });
    await fsyncDir(this.dir).catch(() => undefined);
  }

  async keys(): Promise<string[]> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    return names.filter((n) => n.endsWith('.json')).map((n) => n.slice(0, -5));
  }

  async all(): Promise<Map<string, T>> {
    const out = new Map<string, T>();
    for (const key of await this.keys()) {
      const v = await this.get(key);
      if (v !== undefined) out.set(key, v);
    }
    return out;
  }
}

/** A tiny async mutex: run critical sections one at a time, in call order. */
export class Mutex {
  private tail: Promise<unknown> = Promise.resolve();

  run<R>(fn: () => Promise<R>): Promise<R> {
    const next = this.tail.then(fn, fn);
    this.tail = next.catch(() => undefined);
    return next;
  }
}

/** Mutexes by key (one per layer chain ID while it is being committed). */
export class KeyedMutex {
  private readonly locks = new Map<string, { mutex: Mutex; users: number }>();

  async run<R>(key: string, fn: () => Promise<R>): Promise<R> {
    let entry = this.locks.get(key);
    if (!entry) {
      entry = { mutex: new Mutex(), users: 0 };
      this.locks.set(key, entry);
    }
    entry.users++;
    try {
      return await entry.mutex.run(fn);
    } finally {
      entry.users--;
      if (entry.users === 0) this.locks.delete(key);
    }
  }
}
