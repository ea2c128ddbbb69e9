import { constants, crc32, deflateRaw } from 'node:zlib';

/** Uncompressed bytes per block compressed on its own (pigz's default is 128 KiB; larger blocks keep the pool busy with less overhead). */
const BLOCK = 1024 * 1024;
/** How much of the previous block primes the next one's window (deflate's window). */
const DICTIONARY = 32 * 1024;

/** gzip header: magic, deflate, no flags, mtime 0, no extra flags, OS unknown (as Go's gzip writes it). */
const HEADER = Buffer.from([0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0xff]);

function deflateBlock(
  data: Buffer,
  dictionary: Buffer | undefined,
  last: boolean,
  level: number,
): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    deflateRaw(
      data,
      {
        level,
        ...(dictionary ? { dictionary } : {}),
        finishFlush: last ? constants.Z_FINISH : constants.Z_SYNC_FLUSH,
      },
      (err, out) => (err ? reject(err) : resolve(out)),
    ),
  );
}

/** Bytes of each of the three samples (start, middle, end) that decide whether a block compresses. */
const SAMPLE = 16 * 1024;
/** A block whose samples deflate (level 1) to more than this share of their size is stored. */
const INCOMPRESSIBLE = 0.98;

/**
 * Deflate a block; a block that does not compress (its samples gain less than 2% at level 1:
 * random or already compressed data) is stored (level 0) instead of spending the CPU for
 * nothing. The decision depends only on the block's bytes, so the output stays reproducible.
 */
async function compressBlock(
  data: Buffer,
  dictionary: Buffer | undefined,
  last: boolean,
  level: number,
): Promise<Buffer> {
  let chosen = level;
  if (level !== 0 && data.length >= SAMPLE * 4) {
    const mid = Math.floor(data.length / 2);
    const sample = Buffer.concat([
      data.subarray(0, SAMPLE),
      data.subarray(mid, mid + SAMPLE),
      data.subarray(data.length - SAMPLE),
    ]);
    const packed = await new Promise<Buffer>((resolve, reject) =>
      deflateRaw(sample, { level: 1 }, (err, out) => (err ? reject(err) : resolve(out))),
    );
    if (packed.length > sample.length * INCOMPRESSIBLE) chosen = 0;
  }
  return deflateBlock(data, dictionary, last, chosen);
}

/** Cut a byte stream into blocks of exactly `size` bytes (the last may be shorter or empty). */
async function* blocks(source: AsyncIterable<Buffer>, size: number): AsyncGenerator<Buffer> {
  let parts: Buffer[] = [];
  let have = 0;
  for await (const chunk of source) {
    let c = chunk;
    while (c.length) {
      const take = Math.min(size - have, c.length);
      parts.push(c.subarray(0, take));
      have += take;
      c = c.subarray(take);
      if (have === size) {
        yield parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, have);
        parts = [];
        have = 0;
      }
    }
  }
  yield Buffer.concat(parts, have);
}

/**
 * gzip `source` the way pigz does: one gzip member whose deflate stream is made of blocks
 * compressed in parallel on libuv's thread pool (each primed with the 32 KiB before it and ended
 * with a sync flush, the last one finished); blocks that do not compress are stored. The output
 * depends only on the input and `level`, so the same layer always compresses to the same digest.
 * At most `parallel` blocks are held.
 */
export async function* parallelGzip(
  source: AsyncIterable<Buffer>,
  opts: { level?: number; parallel?: number } = {},
): AsyncGenerator<Buffer> {
  const level = opts.level ?? constants.Z_DEFAULT_COMPRESSION;
  const parallel = Math.max(1, opts.parallel ?? 4);
  yield HEADER;
  let crc = 0;
  let length = 0;
  const inFlight: Array<Promise<Buffer>> = [];
  let previous: Buffer | undefined;
  let pending: Buffer | undefined;
  const submit = (block: Buffer, last: boolean) => {
    const dictionary = previous?.length
      ? previous.subarray(Math.max(0, previous.length - DICTIONARY))
      : undefined;
    crc = crc32(block, crc);
    length = (length + block.length) >>> 0;
    const p = compressBlock(block, dictionary, last, level);
    p.catch(() => undefined); // awaited in order below
    inFlight.push(p);
    previous = block;
  };
  try {
    for await (const block of blocks(source, BLOCK)) {
      // a block is the last only when nothing follows it: hold one back
      if (pending) submit(pending, false);
      pending = block;
      while (inFlight.length >= parallel) yield await (inFlight.shift() as Promise<Buffer>);
    }
    submit(pending ?? Buffer.alloc(0), true);
    while (inFlight.length) yield await (inFlight.shift() as Promise<Buffer>);
  } finally {
    inFlight.length = 0;
  }
  const trailer = Buffer.alloc(8);
  trailer.writeUInt32LE(crc >>> 0, 0);
  trailer.writeUInt32LE(length, 4);
  yield trailer;
}
