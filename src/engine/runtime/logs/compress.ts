import { createReadStream, createWriteStream } from 'node:fs';
import { type FileHandle, open, rename, rm, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import { errnoCode } from '../../../common/errors.js';
import { decodeEntry } from './json-file.js';
import { linesBackward } from './lines-backward.js';

/**
 * Compressed rotated logs as json-file writes them (`compress=true`): `<log>.N.gz`, a gzip member
 * whose header carries an extra field `{"lastTime":"<time of its last entry>"}` (moby's
 * rotateFileMetadata; its readers skip files older than `since` with it).
 */

/** The gzip header Go's compress/gzip writes with Header.Extra set (no mtime, OS unknown). */
function gzipHeader(extra: Buffer): Buffer {
  const h = Buffer.alloc(12 + extra.length);
  h.set([0x1f, 0x8b, 0x08, 0x04, 0, 0, 0, 0, 0x00, 0xff]);
  h.writeUInt16LE(extra.length, 10);
  extra.copy(h, 12);
  return h;
}

/** Replaces zlib's own 10-byte gzip header by `header`. */
function replaceHeader(header: Buffer): Transform {
  let skip = 10;
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      if (skip === 0) return done(null, chunk);
      const drop = Math.min(skip, chunk.length);
      skip -= drop;
      const rest = chunk.subarray(drop);
      if (header.length > 0) {
        const out = Buffer.concat([header, rest]);
        header = Buffer.alloc(0);
        return done(null, out);
      }
      done(null, rest);
    },
  });
}

/** The time of the last entry of a json-file log (empty when it has none). */
export async function lastEntryTime(path: string): Promise<string> {
  let handle: FileHandle;
  try {
    handle = await open(path, 'r');
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return '';
    throw err;
  }
  try {
    for await (const { line } of linesBackward(handle, (await handle.stat()).size)) {
      const copy = Buffer.from(line);
      const e = decodeEntry(copy);
      if (e) return e.parsed ? e.parsed.time : copy.toString('latin1', e.timeStart, e.timeEnd);
    }
    return '';
  } finally {
    await handle.close();
  }
}

/**
 * Compress a rotated log `path` into `path.gz` (through a temp file, so that a reader never sees
 * half of it) and remove `path`.
 */
export async function compressLog(path: string): Promise<void> {
  const lastTime = await lastEntryTime(path);
  const extra = Buffer.from(JSON.stringify(lastTime ? { lastTime } : {}), 'utf8');
  const tmp = `${path}.gz.tmp`;
  try {
    await pipeline(
      createReadStream(path),
      createGzip(),
      replaceHeader(gzipHeader(extra)),
      createWriteStream(tmp, { mode: 0o640 }),
    );
    await rename(tmp, `${path}.gz`);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  await unlink(path);
}

/** Compressions under way, by the path of the file being compressed. */
const running = new Map<string, Promise<void>>();

/**
 * compressLog in the background, once per path at a time (a writer opened again while the last
 * one's compression runs waits for it rather than racing it).
 */
export function compressInBackground(path: string, onError: (err: unknown) => void): Promise<void> {
  const prev = running.get(path) ?? Promise.resolve();
  const next = prev
    .then(() => compressLog(path))
    .catch((err) => {
      if (errnoCode(err) !== 'ENOENT') onError(err);
    })
    .finally(() => {
      if (running.get(path) === next) running.delete(path);
    });
  running.set(path, next);
  return next;
}

/** Resolves when no compression of `path` runs. */
export function compressed(path: string): Promise<void> {
  return running.get(path) ?? Promise.resolve();
}

let seq = 0;

/**
 * A compressed log, decompressed for reading: into a file beside it whose name does not start
 * with the log's (followers watching the directory ignore it), unlinked at once, so that nothing
 * is left behind whatever happens. Null when the file is gone.
 */
export async function openDecompressed(gzPath: string): Promise<FileHandle | null> {
  const tmp = join(dirname(gzPath), `.${basename(gzPath)}.${process.pid}.${++seq}.read`);
  const out = await open(tmp, 'wx+', 0o600);
  await unlink(tmp);
  try {
    // (not out.createWriteStream: a stream on a FileHandle keeps its close() waiting)
    let at = 0;
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        out.write(chunk, 0, chunk.length, at).then(
          ({ bytesWritten }) => {
            at += bytesWritten;
            done(bytesWritten === chunk.length ? null : new Error('short write'));
          },
          (err: Error) => done(err),
        );
      },
    });
    await pipeline(createReadStream(gzPath), createGunzip(), sink);
    return out;
  } catch (err) {
    await out.close();
    if (errnoCode(err) === 'ENOENT') return null;
    throw err;
  }
}
