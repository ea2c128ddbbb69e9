/**
 * Reading tar header blocks (ustar, GNU and PAX), shared by the scanners of this directory
 * (tar-split's recorder, tar-scan's member reader).
 */

export const BLOCK = 512;

/**
 * One header block gathered from the chunks of a stream: read in place when a chunk holds it whole
 * and no part of it came before, else copied into a buffer that the next block reuses (a reader
 * that keeps a header copies it).
 */
export class HeaderBlock {
  private readonly buf = Buffer.alloc(BLOCK);
  private have = 0;

  /** Bytes of a block gathered so far (0 at a block boundary). */
  get pending(): number {
    return this.have;
  }

  /** Takes what it needs from the start of `c`: how many bytes, and the block once it is whole. */
  take(c: Buffer): { used: number; block?: Buffer } {
    if (this.have === 0 && c.length >= BLOCK) return { used: BLOCK, block: c.subarray(0, BLOCK) };
    const used = Math.min(BLOCK - this.have, c.length);
    c.copy(this.buf, this.have, 0, used);
    this.have += used;
    if (this.have < BLOCK) return { used };
    this.have = 0;
    return { used, block: this.buf };
  }
}

/** tar-stream's names for the type flags (null for the ones it does not know). */
export const TAR_TYPES: Record<string, string> = {
  '0': 'file',
  '\0': 'file',
  '1': 'link',
  '2': 'symlink',
  '3': 'character-device',
  '4': 'block-device',
  '5': 'directory',
  '6': 'fifo',
  '7': 'contiguous-file',
};

/** The NUL-terminated string in `b[start, end)`. */
export function cString(b: Buffer, start: number, end: number): string {
  let e = start;
  while (e < end && b[e] !== 0) e++;
  return b.toString('utf8', start, e);
}

/** A numeric field: octal (spaces and NULs around it), or GNU base-256 (the high bit set). */
export function parseNumeric(b: Buffer, start: number, len: number): number {
  if ((b[start] as number) & 0x80) {
    let v = (b[start] as number) & 0x7f;
    for (let i = 1; i < len; i++) v = v * 256 + (b[start + i] as number);
    return v;
  }
  const s = b
    .toString('latin1', start, start + len)
    .replace(/\0.*$/s, '')
    .trim();
  if (s === '') return 0;
  if (!/^[0-7]+$/.test(s)) throw new Error(`bad number ${JSON.stringify(s)} in a tar header`);
  return Number.parseInt(s, 8);
}

/** The unsigned sum of a header block with its checksum field counted as spaces. */
export function headerSum(h: Buffer): number {
  let sum = 8 * 0x20;
  for (let i = 0; i < BLOCK; i++) if (i < 148 || i >= 156) sum += h[i] as number;
  return sum;
}

export function checksumOk(h: Buffer): boolean {
  let want: number;
  try {
    want = parseNumeric(h, 148, 8);
  } catch {
    return false;
  }
  return headerSum(h) === want;
}

/** A PAX extended header's records (`<len> <key>=<value>\n`). */
export function parsePax(body: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let i = 0;
  while (i < body.length) {
    const sp = body.indexOf(0x20, i);
    if (sp < 0) break;
    const len = Number.parseInt(body.toString('latin1', i, sp), 10);
    if (!Number.isFinite(len) || len <= 0 || i + len > body.length) break;
    const rec = body.toString('utf8', sp + 1, i + len - 1);
    const eq = rec.indexOf('=');
    if (eq > 0) out[rec.slice(0, eq)] = rec.slice(eq + 1);
    i += len;
  }
  return out;
}

/** Whether a POSIX ustar header (with a name prefix; GNU's `ustar  ` has times there instead). */
export function isUstar(h: Buffer): boolean {
  return h.toString('latin1', 257, 263) === 'ustar\0';
}
