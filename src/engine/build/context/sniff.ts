import { HostStorageOps, type StorageOps } from '../../storage/adapters/host.ops.js';
import { decompress } from '../../storage/layer.apply.js';

/** Whether a block is a tar header (its checksum holds), or the zero block that ends an archive. */
export function isTarHeader(block: Buffer): boolean {
  if (block.length < 512) return false;
  const head = block.subarray(0, 512);
  if (head.every((b) => b === 0)) return true;
  const field = head
    .subarray(148, 156)
    .toString('latin1')
    .replace(/[\0 ]+$/, '')
    .trim();
  if (!/^[0-7]+$/.test(field)) return false;
  let sum = 0;
  for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : (head[i] as number);
  return Number.parseInt(field, 8) === sum;
}

/**
 * Whether the start of a (decompressed) body is read as a tar: empty, a tar header, or binary
 * data (which then fails as dockerd fails); false for text (a plain Dockerfile).
 */
export function isTarOrBinary(first: Buffer): boolean {
  return first.length === 0 || isTarHeader(first) || first.includes(0);
}

/** The decompressed bytes of a stream, with what its first 512 bytes are. */
export interface Sniffed {
  /**
   * Empty input, a tar, or binary data (read as a tar, which fails as dockerd fails): false for
   * text (a plain Dockerfile).
   */
  isTar: boolean;
  empty: boolean;
  compressed: boolean;
  bytes: AsyncGenerator<Buffer>;
}

/** Decompress `source` (gzip, bzip2, xz, zstd or none, sniffed) and look at its start. */
export async function sniffArchive(
  source: AsyncIterable<Buffer>,
  ops: StorageOps = new HostStorageOps(),
  what = 'build context',
): Promise<Sniffed> {
  let compressed = false;
  const inner = decompress(
    source,
    ops,
    (c) => {
      compressed = c !== 'none';
    },
    what,
  );
  const head: Buffer[] = [];
  let size = 0;
  let ended = false;
  while (size < 512) {
    const r = await inner.next();
    if (r.done) {
      ended = true;
      break;
    }
    head.push(r.value);
    size += r.value.length;
  }
  const first = Buffer.concat(head);
  const bytes = (async function* () {
    if (first.length) yield first;
    if (ended) return;
    yield* inner;
  })();
  return {
    isTar: isTarOrBinary(first),
    empty: first.length === 0,
    compressed,
    bytes,
  };
}

/** Everything an async stream gives, up to `limit` bytes (`tooLarge` beyond). */
export async function readAllBounded(
  source: AsyncIterable<Buffer>,
  limit: number,
  tooLarge: () => Error,
): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of source) {
    size += c.length;
    if (size > limit) throw tooLarge();
    chunks.push(c);
  }
  return Buffer.concat(chunks);
}
