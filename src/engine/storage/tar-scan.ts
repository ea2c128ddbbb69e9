import type tarStream from 'tar-stream';
import {
  BLOCK,
  cString,
  HeaderBlock,
  headerSum,
  isUstar,
  parseNumeric,
  parsePax,
  TAR_TYPES,
} from './tar-header.js';

/** The largest PAX or GNU long-name record read (as tar-stream). */
const MAX_META = 4 * 1024 * 1024;

/** What a TarScanner tells as it reads. */
export interface TarScanSink {
  /** A member's header (PAX and GNU long names applied); its body follows through `data`. */
  member(header: tarStream.Header): void;
  /** A piece of the current member's body: a view of the input (copy what is kept). */
  data(chunk: Buffer): void;
  /** The current member's body is complete (also for a member without one). */
  end(): void;
}

/**
 * An uncompressed tarball read synchronously as its chunks arrive, with tar-stream's reading of
 * headers (ustar name prefixes, base-256 numbers, PAX `path`/`linkpath`/`size`, GNU long names, a
 * name ending in `/` a directory; a type flag it does not know is a `file`, where tar-stream says
 * null and its callers take a file) and its errors (`Invalid tar header…`,
 * `Unexpected end of data`), without a stream per member: a body's bytes go to the sink as views
 * of the chunk they came in.
 */
export class TarScanner {
  private readonly header = new HeaderBlock();
  /** Bytes left of the current body, then of its padding. */
  private body = 0;
  private pad = 0;
  private inMember = false;
  /** A PAX or long-name record being read. */
  private meta: Buffer[] | undefined;
  private metaType = '';
  private pax: Record<string, string> | undefined;
  private paxGlobal: Record<string, string> | undefined;
  private longName: string | undefined;
  private longLink: string | undefined;

  constructor(private readonly sink: TarScanSink) {}

  write(chunk: Buffer): void {
    let c = chunk;
    while (c.length) {
      if (this.body > 0) {
        const n = Math.min(this.body, c.length);
        const piece = c.subarray(0, n);
        if (this.meta) this.meta.push(Buffer.from(piece));
        else this.sink.data(piece);
        this.body -= n;
        c = c.subarray(n);
        if (this.body === 0) this.bodyDone();
        continue;
      }
      if (this.pad > 0) {
        const n = Math.min(this.pad, c.length);
        this.pad -= n;
        c = c.subarray(n);
        continue;
      }
      const { used, block } = this.header.take(c);
      c = c.subarray(used);
      if (block) this.onHeader(block);
    }
  }

  /** The input ended: an archive cut inside a block, a record or a body is `Unexpected end of data`. */
  finish(): void {
    if (this.body > 0 || this.pad > 0 || this.header.pending > 0) throw new Error('Unexpected end of data');
  }

  private bodyDone(): void {
    if (this.meta) {
      const body = Buffer.concat(this.meta);
      this.meta = undefined;
      if (this.metaType === 'x') this.pax = { ...this.paxGlobal, ...parsePax(body) };
      else if (this.metaType === 'g') this.paxGlobal = parsePax(body);
      else if (this.metaType === 'L' || this.metaType === 'N') this.longName = cString(body, 0, body.length);
      else this.longLink = cString(body, 0, body.length);
      return;
    }
    this.inMember = false;
    this.sink.end();
  }

  private onHeader(h: Buffer): void {
    const sum = headerSum(h);
    // an all-zero block (the end of the archive, or padding): skipped, as tar-stream
    if (sum === 8 * 0x20) return;
    let want: number;
    try {
      want = parseNumeric(h, 148, 8);
    } catch {
      want = -1;
    }
    if (sum !== want) {
      throw new Error('Invalid tar header. Maybe the tar is corrupted or it needs to be gunzipped?');
    }
    const flag = String.fromCharCode(h[156] as number);
    let size = parseNumeric(h, 124, 12);
    if (flag === 'x' || flag === 'g' || flag === 'L' || flag === 'K' || flag === 'N') {
      if (size > MAX_META) throw new Error('Header exceeds max size');
      this.metaType = flag;
      this.meta = [];
      this.body = size;
      this.pad = (BLOCK - (size % BLOCK)) % BLOCK;
      if (size === 0) this.bodyDone();
      return;
    }
    let name = cString(h, 0, 100);
    if (isUstar(h) && h[345] !== 0) name = `${cString(h, 345, 500)}/${name}`;
    let linkname = h[157] === 0 ? null : cString(h, 157, 257);
    if (this.longName !== undefined) name = this.longName;
    if (this.longLink !== undefined) linkname = this.longLink;
    const pax = this.pax ?? (this.paxGlobal ? { ...this.paxGlobal } : undefined);
    if (pax?.path) name = pax.path;
    if (pax?.linkpath) linkname = pax.linkpath;
    if (pax?.size) size = Number.parseInt(pax.size, 10);
    this.pax = undefined;
    this.longName = undefined;
    this.longLink = undefined;
    if (!(size >= 0)) throw new Error('Invalid header');
    let type = (TAR_TYPES[flag] ?? 'file') as tarStream.Header['type'];
    if (type === 'file' && name.endsWith('/')) type = 'directory';
    const header: tarStream.Header = {
      name,
      mode: parseNumeric(h, 100, 8),
      uid: parseNumeric(h, 108, 8),
      gid: parseNumeric(h, 116, 8),
      size,
      mtime: new Date(1000 * parseNumeric(h, 136, 12)),
      type,
      linkname: linkname ?? '',
      uname: cString(h, 265, 297),
      gname: cString(h, 297, 329),
      devmajor: lenient(h, 329),
      devminor: lenient(h, 337),
      ...(pax ? { pax } : {}),
    };
    this.inMember = true;
    this.sink.member(header);
    // a directory's size is no body (tar-stream skips it)
    const bodySize = type === 'directory' ? 0 : size;
    this.body = bodySize;
    this.pad = (BLOCK - (size % BLOCK)) % BLOCK;
    if (type === 'directory') this.pad += size;
    if (bodySize === 0) this.bodyDone();
  }

  /** Whether a member's body is still being read. */
  get reading(): boolean {
    return this.inMember;
  }
}

/** A device number (read by nobody here): 0 when the field is not a number. */
function lenient(h: Buffer, start: number): number {
  try {
    return parseNumeric(h, start, 8);
  } catch {
    return 0;
  }
}
