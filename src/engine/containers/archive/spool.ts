import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { type FileHandle, mkdir, open, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import {
  BerthError,
  errnoCode,
  errorMessage,
  invalidParameter,
  systemError,
} from '../../../common/errors.js';

/** The default cap on an archive uploaded by docker cp (PUT /containers/{id}/archive): 10 GiB. */
export const DEFAULT_UPLOAD_LIMIT = 10 * 1024 ** 3;

const PREFIX = 'cp-';

/** An archive received whole into the engine's storage: read it (as often as needed), then remove it. */
export interface SpooledArchive {
  readonly size: number;
  open(): Readable;
  /** Idempotent; never rejects. */
  remove(): Promise<void>;
}

function tooLarge(limit: number): BerthError {
  return new BerthError('TooLarge', `archive is larger than the engine accepts (${limit} bytes)`);
}

/**
 * Where docker cp uploads wait until they are complete (`<data root>/tmp/cp-*`), so that a
 * container is never frozen while a client sends: an upload is received first, bounded by `limit`
 * (413 beyond it, on the declared length before anything is read), and its file is removed in
 * every case (the caller's `remove` after use; this class on any failure while receiving, a
 * client that leaves included; `sweep` at start for what a killed engine left).
 */
export class UploadSpool {
  /**
   * `unpack` decompresses what `open` reads (dockerd takes a compressed archive too); what it
   * yields is bounded by `limit` as well, so a small bomb cannot fill the container.
   */
  constructor(
    readonly dir: string,
    readonly limit = DEFAULT_UPLOAD_LIMIT,
    private readonly unpack?: (raw: AsyncIterable<Buffer>) => AsyncIterable<Buffer>,
  ) {}

  /** Make the directory and remove what an earlier engine left there. */
  async sweep(): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    for (const name of await readdir(this.dir)) {
      if (name.startsWith(PREFIX)) await rm(join(this.dir, name), { force: true });
    }
  }

  /** 413 when a declared length is over the limit (nothing read yet). */
  checkDeclared(length: number | undefined): void {
    if (length !== undefined && length > this.limit) throw tooLarge(this.limit);
  }

  /** Receive `body` whole; a body that fails or ends early leaves nothing behind. */
  async receive(body: Readable, declaredLength?: number): Promise<SpooledArchive> {
    this.checkDeclared(declaredLength);
    const path = join(this.dir, `${PREFIX}${randomBytes(12).toString('hex')}.tar`);
    const remove = () => rm(path, { force: true }).catch(() => undefined);
    let size: number;
    try {
      await mkdir(this.dir, { recursive: true, mode: 0o700 }).catch((err) => {
        throw storeError(err);
      });
      const file = await open(path, 'wx', 0o600).catch((err) => {
        throw storeError(err);
      });
      try {
        size = await copyInto(file, body, this.limit);
      } finally {
        await file.close();
      }
      if (declaredLength !== undefined && size !== declaredLength) {
        throw invalidParameter(`cannot read the archive: ${size} of ${declaredLength} bytes received`);
      }
    } catch (err) {
      await remove();
      if (err instanceof BerthError) throw err;
      // the client's body failed (a client that went away: ECONNRESET, "aborted")
      throw invalidParameter(`cannot read the archive: ${errorMessage(err)}`);
    }
    const { unpack, limit } = this;
    const read = unpack
      ? () => Readable.from(bounded(unpack(createReadStream(path)), limit))
      : () => createReadStream(path);
    return { size, open: read, remove };
  }
}

/** The chunks of `source`, failing once they add up to more than `limit`. */
async function* bounded(source: AsyncIterable<Buffer>, limit: number): AsyncGenerator<Buffer> {
  let size = 0;
  for await (const chunk of source) {
    size += chunk.length;
    if (size > limit) throw tooLarge(limit);
    yield chunk;
  }
}

/**
 * Write `body` to `file`, one chunk at a time (paused while each is written). Not an async
 * iteration, which destroys the request when left early: a refused body is only left paused, and
 * the route closes the connection once it has answered.
 */
function copyInto(file: FileHandle, body: Readable, limit: number): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    let size = 0;
    let settled = false;
    const finish = (err?: unknown) => {
      if (settled) return;
      settled = true;
      body.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
      body.pause();
      if (err) reject(err);
      else resolve(size);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return finish(tooLarge(limit));
      body.pause();
      file.write(chunk).then(
        () => {
          if (!settled) body.resume();
        },
        (err) => finish(storeError(err)),
      );
    };
    const onEnd = () => finish();
    const onError = (err: Error) => finish(err);
    // a client that leaves: closed before the end
    const onClose = () => finish(new Error('the client went away'));
    body.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
    if (body.readableEnded) finish();
    body.resume();
  });
}

/** A failure of the engine's own spool file, told without its path. */
function storeError(err: unknown): BerthError {
  const code = errnoCode(err);
  if (code === 'ENOSPC' || code === 'EDQUOT') {
    return systemError("no space left in the engine's storage to receive the archive");
  }
  return systemError(`cannot store the archive: ${code ?? errorMessage(err)}`);
}
