import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { errnoCode } from '../../common/errors.js';

/** Where the registry processes on one storage write their holds (outside the reference's tree). */
export const HOLDS_DIR = '/berth/gc-holds';
/** A hold file older than this belongs to a request that cannot still be running. */
const HOLD_STALE_MS = 10 * 60_000;
/** The name a blob's data has while a collector decides whether it may go. */
export const TOMBSTONE = 'data.gc-deleting';

const HOST = hostname().replace(/[^A-Za-z0-9_-]/g, '_');

/**
 * Holds shared through the storage, so that a collector in one process sees what requests of the
 * other processes on the same root rely on. A request writes its digests to a file of its own
 * in HOLDS_DIR before it checks that they exist, and removes it when done; a collector first
 * moves a blob's data aside (TOMBSTONE), then reads every hold, then deletes the blob or puts
 * it back. Whichever comes first, no request relies on a blob that goes: either the collector
 * reads the request's hold (and keeps the blob), or it had moved the data aside before the
 * request's check, which then finds no blob (BLOB_UNKNOWN: the client uploads it again).
 */
export class SharedHolds {
  private ready: Promise<unknown> | undefined;
  private seq = 0;

  /** `dir`: the full path of HOLDS_DIR in the storage. */
  constructor(readonly dir: string) {}

  /** Write a hold of `digests`; resolves with its release. */
  async add(digests: readonly string[]): Promise<() => Promise<void>> {
    if (digests.length === 0) return async () => {};
    this.ready ??= mkdir(this.dir, { recursive: true });
    await this.ready;
    const file = join(this.dir, `${HOST}-${process.pid}-${randomBytes(4).toString('hex')}-${this.seq++}`);
    await writeFile(file, digests.join('\n'));
    return () => rm(file, { force: true });
  }

  /** Every digest some live request on this storage holds now. */
  async current(): Promise<Set<string>> {
    const out = new Set<string>();
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return out;
      throw err;
    }
    await Promise.all(
      names.map(async (name) => {
        const file = join(this.dir, name);
        if (!(await live(name, file))) {
          await rm(file, { force: true });
          return;
        }
        const text = await readFile(file, 'utf8').catch(() => '');
        for (const d of text.split('\n')) if (d) out.add(d);
      }),
    );
    return out;
  }
}

/** A hold file is live unless its process (of this host) is gone or it is older than any request. */
async function live(name: string, file: string): Promise<boolean> {
  const st = await stat(file).catch(() => undefined);
  if (!st) return false;
  if (Date.now() - st.mtimeMs > HOLD_STALE_MS) return false;
  const m = /^(.*)-(\d+)-[0-9a-f]{8}-\d+$/.exec(name);
  if (m && m[1] === HOST && Number(m[2]) !== process.pid) {
    try {
      process.kill(Number(m[2]), 0);
    } catch (err) {
      if (errnoCode(err) === 'ESRCH') return false;
    }
  }
  return true;
}

/**
 * Delete a blob's directory unless a request of any process holds the digest: its data moved
 * aside first, the holds read, then the directory removed or the data put back. True when deleted.
 */
export async function deleteUnlessHeld(
  holds: SharedHolds,
  digest: string,
  blobDir: string,
): Promise<boolean> {
  const data = join(blobDir, 'data');
  const aside = join(blobDir, TOMBSTONE);
  try {
    await rename(data, aside);
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
  if ((await holds.current()).has(digest)) {
    await rename(aside, data);
    return false;
  }
  // Only what was moved aside goes: an upload of the same content completed meanwhile (its hold
  // written after the holds were read) has put new data in place, which stays.
  await rm(aside, { force: true });
  await rmdir(blobDir).catch((err: unknown) => {
    const code = errnoCode(err);
    if (code !== 'ENOTEMPTY' && code !== 'EEXIST' && code !== 'ENOENT') throw err;
  });
  return true;
}

/**
 * Put back the data a collector killed mid-decision had moved aside (call under the storage's
 * gc lock, when no other collector can be deciding). True when there was some.
 */
export async function restoreTombstone(blobDir: string): Promise<boolean> {
  try {
    await rename(join(blobDir, TOMBSTONE), join(blobDir, 'data'));
    return true;
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
}
