/**
 * A byte-level tar writer for hostile archives: every header field is written as given (no
 * cleaning of names, no automatic long-name records), plus PAX (`x`, `g`) and GNU long-name (`L`,
 * `K`) records on request. Each member is a header block and its data padded to 512 bytes; the
 * archive ends with two zero blocks unless told otherwise.
 */

export type TarType =
  | 'file'
  | 'link'
  | 'symlink'
  | 'char'
  | 'block'
  | 'directory'
  | 'fifo'
  | 'pax'
  | 'pax-global'
  | 'gnu-longname'
  | 'gnu-longlink';

const TYPE_FLAG: Record<TarType, string> = {
  file: '0',
  link: '1',
  symlink: '2',
  char: '3',
  block: '4',
  directory: '5',
  fifo: '6',
  pax: 'x',
  'pax-global': 'g',
  'gnu-longname': 'L',
  'gnu-longlink': 'K',
};

export interface RawMember {
  name: string;
  type?: TarType;
  data?: string | Buffer;
  /** The size field when it must differ from the data's length (a lying header). */
  size?: number;
  mode?: number;
  uid?: number;
  gid?: number;
  mtime?: number;
  linkname?: string;
  devmajor?: number;
  devminor?: number;
  /** The ustar prefix field (joined to the name with `/` by readers). */
  prefix?: string;
  /** `ustar\0` + `00` (default) or GNU's `ustar  \0`. */
  magic?: 'ustar' | 'gnu';
}

function octal(value: number, width: number): string {
  return `${value.toString(8).padStart(width - 1, '0')}\0`;
}

function put(block: Buffer, offset: number, width: number, text: string | Buffer): void {
  const bytes = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  bytes.copy(block, offset, 0, Math.min(bytes.length, width));
}

/** One 512-byte header block with its checksum. */
export function headerBlock(m: RawMember, dataLength: number): Buffer {
  const b = Buffer.alloc(512);
  const type = m.type ?? 'file';
  put(b, 0, 100, m.name);
  put(b, 100, 8, octal(m.mode ?? (type === 'directory' ? 0o755 : 0o644), 8));
  put(b, 108, 8, octal(m.uid ?? 0, 8));
  put(b, 116, 8, octal(m.gid ?? 0, 8));
  put(b, 124, 12, octal(m.size ?? dataLength, 12));
  put(b, 136, 12, octal(m.mtime ?? 1_600_000_000, 12));
  b.fill(0x20, 148, 156);
  put(b, 156, 1, TYPE_FLAG[type]);
  put(b, 157, 100, m.linkname ?? '');
  if (m.magic === 'gnu') put(b, 257, 8, 'ustar  \0');
  else {
    put(b, 257, 6, 'ustar\0');
    put(b, 263, 2, '00');
  }
  put(b, 265, 32, 'root');
  put(b, 297, 32, 'root');
  put(b, 329, 8, octal(m.devmajor ?? 0, 8));
  put(b, 337, 8, octal(m.devminor ?? 0, 8));
  put(b, 345, 155, m.prefix ?? '');
  let sum = 0;
  for (const byte of b) sum += byte;
  put(b, 148, 8, `${sum.toString(8).padStart(6, '0')}\0 `);
  return b;
}

function padded(data: Buffer): Buffer {
  const rest = data.length % 512;
  return rest ? Buffer.concat([data, Buffer.alloc(512 - rest)]) : data;
}

/** One member: its header and its data, padded. */
export function member(m: RawMember): Buffer {
  const data = typeof m.data === 'string' ? Buffer.from(m.data, 'utf8') : (m.data ?? Buffer.alloc(0));
  return Buffer.concat([headerBlock(m, data.length), padded(data)]);
}

/** The body of a PAX record set: `<len> <key>=<value>\n` per record, the length counting itself. */
export function paxRecords(records: Record<string, string>): Buffer {
  const parts: Buffer[] = [];
  for (const [k, v] of Object.entries(records)) {
    const body = ` ${k}=${v}\n`;
    let len = Buffer.byteLength(body) + 1;
    while (String(len).length + Buffer.byteLength(body) !== len)
      len = String(len).length + Buffer.byteLength(body);
    parts.push(Buffer.from(`${len}${body}`, 'utf8'));
  }
  return Buffer.concat(parts);
}

/** A PAX extended header (`x`, for the next member) or global one (`g`). */
export function paxHeader(records: Record<string, string>, global = false): Buffer {
  return member({
    name: global ? 'pax_global_header' : 'PaxHeaders/x',
    type: global ? 'pax-global' : 'pax',
    data: paxRecords(records),
  });
}

/** A GNU long name (`L`) or long link name (`K`) record for the next member. */
export function gnuLong(text: string, link = false): Buffer {
  return member({
    name: '././@LongLink',
    type: link ? 'gnu-longlink' : 'gnu-longname',
    data: Buffer.from(`${text}\0`, 'utf8'),
    magic: 'gnu',
  });
}

/** The end of an archive: two zero blocks. */
export const END = Buffer.alloc(1024);

/** An archive of members (each a Buffer from member/paxHeader/gnuLong, or a RawMember). */
export function tarOf(parts: Array<Buffer | RawMember>, end = true): Buffer {
  return Buffer.concat([...parts.map((p) => (Buffer.isBuffer(p) ? p : member(p))), ...(end ? [END] : [])]);
}
