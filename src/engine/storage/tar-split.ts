import { constants } from 'node:fs';
import { lstat, open } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import { invalidParameter, systemError } from '../../common/errors.js';
import {
  BLOCK,
  checksumOk,
  cString,
  HeaderBlock,
  isUstar,
  parseNumeric,
  parsePax,
  TAR_TYPES,
} from './tar-header.js';

/**
 * A tar-split record (dockerd's `tar-split.json.gz`, in a compact binary form): every byte of a
 * layer tarball except the bodies of its regular files, in order, with each body replaced by the
 * member's path and size. With the layer's unpacked files it rebuilds the exact tarball, so a
 * layer whose compressed blob was not kept still pushes with its own diff ID.
 *
 * Format (gzip'd): `BTS1`, then segments: `0x01 <u32 length> <bytes>` (headers, PAX and GNU
 * long-name records, padding, end-of-archive blocks, bodies of anything but regular files) and
 * `0x02 <u32 path length> <path utf-8> <u48 size>` (a regular file's body, read from the diff
 * directory at rebuild).
 */
const MAGIC = Buffer.from('BTS1');
const RAW = 0x01;
const FILE = 0x02;

/** A member as the scanner sees it (names resolved through PAX / GNU long-name records). */
export interface ScannedMember {
  name: string;
  /** tar-stream's names for the type flag; null for the ones it does not know. */
  type: string | null;
  size: number;
  linkname: string | null;
}

/**
 * Walk an uncompressed tarball block by block as it streams: each member goes to `onMember`, and
 * the bytes that are not regular-file bodies are recorded (see the format above). Bodies are
 * only counted, never copied. `path` maps a member name to the path its body has on disk (throws
 * for a name that escapes the layer).
 */
export class TarSplitRecorder {
  private readonly segments: Buffer[] = [MAGIC];
  private raw: Buffer[] = [];
  private rawLength = 0;
  private readonly header = new HeaderBlock();
  /** Bytes left of the current body and of its padding. */
  private body = 0;
  private pad = 0;
  /** What the current body is: a regular file's (counted), metadata (kept and parsed), other (kept). */
  private bodyKind: 'file' | 'meta' | 'raw' = 'raw';
  private meta: Buffer[] = [];
  private metaType = '';
  private pax: Record<string, string> = {};
  private longName: string | undefined;
  private longLink: string | undefined;
  private sawAny = false;

  constructor(
    private readonly onMember: (m: ScannedMember) => void,
    private readonly path: (name: string) => string,
  ) {}

  private keep(b: Buffer): void {
    if (!b.length) return;
    this.raw.push(Buffer.from(b)); // a copy: never hold on to the (large) chunk
    this.rawLength += b.length;
  }

  private flushRaw(): void {
    if (!this.rawLength) return;
    const head = Buffer.alloc(5);
    head[0] = RAW;
    head.writeUInt32BE(this.rawLength, 1);
    this.segments.push(head, ...this.raw);
    this.raw = [];
    this.rawLength = 0;
  }

  write(chunk: Buffer): void {
    let c = chunk;
    while (c.length) {
      if (this.body > 0) {
        const n = Math.min(this.body, c.length);
        if (this.bodyKind === 'raw') this.keep(c.subarray(0, n));
        else if (this.bodyKind === 'meta') {
          this.keep(c.subarray(0, n));
          this.meta.push(Buffer.from(c.subarray(0, n)));
        }
        this.body -= n;
        c = c.subarray(n);
        if (this.body === 0 && this.bodyKind === 'meta') this.endMeta();
        continue;
      }
      if (this.pad > 0) {
        const n = Math.min(this.pad, c.length);
        this.keep(c.subarray(0, n));
        this.pad -= n;
        c = c.subarray(n);
        continue;
      }
      const { used, block } = this.header.take(c);
      c = c.subarray(used);
      if (block) this.onHeader(block);
    }
  }

  private endMeta(): void {
    const body = Buffer.concat(this.meta);
    this.meta = [];
    if (this.metaType === 'x') this.pax = { ...this.pax, ...parsePax(body) };
    else if (this.metaType === 'L') this.longName = cString(body, 0, body.length);
    else if (this.metaType === 'K') this.longLink = cString(body, 0, body.length);
    // 'g' (global PAX): kept as bytes, applies to nothing berth reads
  }

  private onHeader(h: Buffer): void {
    this.keep(h);
    this.sawAny = true;
    let zero = true;
    for (let i = 0; i < BLOCK; i++)
      if (h[i] !== 0) {
        zero = false;
        break;
      }
    if (zero) return; // end-of-archive (or padding) block
    if (!checksumOk(h)) throw new Error('invalid tar header checksum (a corrupt or compressed tar?)');
    const flag = String.fromCharCode(h[156] as number);
    let size = parseNumeric(h, 124, 12);
    this.pad = (BLOCK - (size % BLOCK)) % BLOCK;
    if (flag === 'x' || flag === 'g' || flag === 'L' || flag === 'K') {
      if (size > 1024 * 1024) throw new Error('Header exceeds max size');
      this.metaType = flag;
      this.bodyKind = 'meta';
      this.body = size;
      if (size === 0) this.endMeta();
      return;
    }
    // a POSIX ustar header has a name prefix (GNU's "ustar  " has times there instead)
    const ustar = isUstar(h);
    let name = cString(h, 0, 100);
    if (ustar) {
      const prefix = cString(h, 345, 500);
      if (prefix) name = `${prefix}/${name}`;
    }
    let linkname = cString(h, 157, 257) || null;
    if (this.longName !== undefined) name = this.longName;
    if (this.longLink !== undefined) linkname = this.longLink;
    if (this.pax.path !== undefined) name = this.pax.path;
    if (this.pax.linkpath !== undefined) linkname = this.pax.linkpath;
    if (this.pax.size !== undefined && /^\d+$/.test(this.pax.size)) {
      size = Number(this.pax.size);
      this.pad = (BLOCK - (size % BLOCK)) % BLOCK;
    }
    this.pax = {};
    this.longName = undefined;
    this.longLink = undefined;
    let type: string | null = TAR_TYPES[flag] ?? null;
    if (type === 'file' && name.endsWith('/')) type = 'directory';
    this.onMember({ name, type, size, linkname });
    this.body = size;
    const base = name.replace(/\/+$/, '').split('/').pop() ?? '';
    if ((type === 'file' || type === 'contiguous-file') && size > 0 && !base.startsWith('.wh.')) {
      // a regular file's body: read from the diff directory at rebuild
      this.flushRaw();
      const path = Buffer.from(this.path(name), 'utf8');
      const seg = Buffer.alloc(1 + 4 + path.length + 6);
      seg[0] = FILE;
      seg.writeUInt32BE(path.length, 1);
      path.copy(seg, 5);
      seg.writeUIntBE(size, 5 + path.length, 6);
      this.segments.push(seg);
      this.bodyKind = 'file';
    } else {
      this.bodyKind = 'raw';
    }
  }

  /** The input ended: true when it ended between members (a whole tarball). */
  get complete(): boolean {
    return this.body === 0 && this.pad === 0 && this.header.pending === 0;
  }

  get empty(): boolean {
    return !this.sawAny;
  }

  /** The record, gzip'd. */
  async finish(): Promise<Buffer> {
    this.flushRaw();
    return promisify(gzip)(Buffer.concat(this.segments));
  }
}

/**
 * Rebuild the exact tarball a tar-split record was made from, reading regular-file bodies from
 * `dir` (the layer's diff directory). Throws when a file is missing or shorter than recorded;
 * the caller checks the result against the diff ID.
 */
export async function* rebuildTar(record: Buffer, dir: string): AsyncGenerator<Buffer> {
  const data = await promisify(gunzip)(record);
  // bodies are read only below real directories of the layer: a symlink among a file's parents
  // (a hostile layer) must never make the upload read a host file
  const realDirs = new Set<string>(['']);
  const checkParents = async (path: string) => {
    const parts = path.split('/');
    parts.pop();
    let cur = '';
    for (const part of parts) {
      cur = cur ? `${cur}/${part}` : part;
      if (realDirs.has(cur)) continue;
      const st = await lstat(join(dir, cur));
      if (!st.isDirectory() || st.isSymbolicLink())
        throw systemError(`layer file ${path} is not below a directory of the layer`);
      realDirs.add(cur);
    }
  };
  if (!data.subarray(0, 4).equals(MAGIC)) throw invalidParameter('not a tar-split record');
  let i = 4;
  const chunk = 1024 * 1024;
  while (i < data.length) {
    const kind = data[i];
    if (kind === RAW) {
      const len = data.readUInt32BE(i + 1);
      yield data.subarray(i + 5, i + 5 + len);
      i += 5 + len;
    } else if (kind === FILE) {
      const plen = data.readUInt32BE(i + 1);
      const path = data.toString('utf8', i + 5, i + 5 + plen);
      const size = data.readUIntBE(i + 5 + plen, 6);
      i += 5 + plen + 6;
      if (path === '' || path === '..' || path.startsWith('../') || path.startsWith('/'))
        throw invalidParameter(`tar-split record names ${JSON.stringify(path)}`);
      await checkParents(path);
      const fh = await open(join(dir, path), constants.O_RDONLY | constants.O_NOFOLLOW);
      try {
        let left = size;
        while (left > 0) {
          const buf = Buffer.allocUnsafe(Math.min(chunk, left));
          const { bytesRead } = await fh.read(buf, 0, buf.length, null);
          if (bytesRead === 0)
            throw systemError(`layer file ${path} is shorter than its tar member (${size} bytes)`);
          left -= bytesRead;
          yield bytesRead === buf.length ? buf : buf.subarray(0, bytesRead);
        }
      } finally {
        await fh.close();
      }
    } else {
      throw invalidParameter('corrupt tar-split record');
    }
  }
}
