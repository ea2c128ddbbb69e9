import type { Readable } from 'node:stream';

/** How long the chunks a source gives at once are taken before other work gets a turn. */
const TURN_MS = 20;

/**
 * Read `body` through its `data` events, each chunk handed to `take` synchronously: no promise or
 * async iteration per chunk (a context is thousands of socket chunks, and each promise costs the
 * event loop more than the chunk's own work). `take` answers whether it wants more; when it does
 * not, or throws, the body is left paused with its listeners gone (never destroyed: a refused
 * request's answer is still sent on its connection) and the answer says whether the body ended.
 * A body that fails or closes before its end rejects (`premature close`: the archive is cut).
 */
export function pumpBody(body: Readable, take: (chunk: Buffer) => boolean): Promise<{ ended: boolean }> {
  return new Promise((resolve, reject) => {
    let settled = false;
    let turn = Date.now();
    const finish = (err: unknown, ended = false) => {
      if (settled) return;
      settled = true;
      body.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
      if (!ended) body.pause();
      if (err) reject(err);
      else resolve({ ended });
    };
    const onData = (chunk: Buffer) => {
      if (settled) return;
      let more: boolean;
      try {
        more = take(chunk);
      } catch (err) {
        finish(err);
        return;
      }
      if (!more) {
        finish(undefined);
        return;
      }
      if (Date.now() - turn > TURN_MS) {
        // a source that gives its chunks in one go: let other requests in
        body.pause();
        setImmediate(() => {
          turn = Date.now();
          if (!settled) body.resume();
        });
      }
    };
    const onEnd = () => finish(undefined, true);
    const onError = (err: Error) => finish(err);
    const onClose = () => finish(new Error('premature close'));
    if (body.readableEnded) {
      resolve({ ended: true });
      return;
    }
    if (body.destroyed) {
      // it failed or closed while nobody was reading
      reject(body.errored ?? new Error('premature close'));
      return;
    }
    body.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
    body.resume();
  });
}

/**
 * How a body whose every chunk is a view of a buffer of its own, those of one buffer one after
 * another, takes a buffer back once a reader is done with all its chunks (a request body read
 * below node's HTTP parser reads its socket into the buffers given back: RawChunkedBody's
 * `lendsBuffers` and `recycle`); undefined for any other body.
 */
export function bufferRecycler(body: Readable): ((buffer: ArrayBufferLike) => void) | undefined {
  const b = body as Readable & { lendsBuffers?: unknown; recycle?: unknown };
  if (b.lendsBuffers !== true || typeof b.recycle !== 'function') return undefined;
  const recycle = b.recycle as (buffer: ArrayBufferLike) => void;
  return (buffer) => recycle.call(body, buffer);
}
