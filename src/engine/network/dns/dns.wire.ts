/**
 * DNS messages in RFC 1035 wire format, read and written by hand: the header, the question, and
 * the resource records the embedded responder answers with (A, AAAA, PTR, OPT). Pure; every read
 * is bounds-checked and a malformed message is a WireError, never a crash.
 */

export const TYPE = { A: 1, PTR: 12, AAAA: 28, OPT: 41 } as const;
export const CLASS_IN = 1;
export const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 } as const;

/** The largest answer a UDP client takes without EDNS (RFC 1035 4.2.1). */
export const UDP_PLAIN_LIMIT = 512;
/** The largest UDP payload the responder advertises and honours (EDNS). */
export const UDP_EDNS_LIMIT = 4096;

export class WireError extends Error {}

export interface Header {
  id: number;
  /** QR: a response. */
  response: boolean;
  opcode: number;
  authoritative: boolean;
  truncated: boolean;
  recursionDesired: boolean;
  recursionAvailable: boolean;
  /** The three Z/AD/CD bits, kept as they came. */
  z: number;
  rcode: number;
  qdcount: number;
  ancount: number;
  nscount: number;
  arcount: number;
}

export interface Question {
  /** Lowercase is not forced: as asked, without the trailing dot (`''` is the root). */
  name: string;
  type: number;
  class: number;
}

export interface ResourceRecord {
  name: string;
  type: number;
  class: number;
  ttl: number;
  data: Buffer;
}

/** A query as the responder needs it: the header, its one question, and the EDNS payload size. */
export interface Query {
  header: Header;
  question: Question;
  /** The UDP payload size the client accepts (512 without EDNS). */
  udpLimit: number;
  /** Whether the query carried an OPT record (the answer then carries one too). */
  edns: boolean;
}

const MAX_NAME = 255;
const MAX_LABEL = 63;
const MAX_POINTERS = 32;

export function readHeader(buf: Buffer): Header {
  if (buf.length < 12) throw new WireError('message shorter than a header');
  const flags = buf.readUInt16BE(2);
  return {
    id: buf.readUInt16BE(0),
    response: (flags & 0x8000) !== 0,
    opcode: (flags >> 11) & 0xf,
    authoritative: (flags & 0x0400) !== 0,
    truncated: (flags & 0x0200) !== 0,
    recursionDesired: (flags & 0x0100) !== 0,
    recursionAvailable: (flags & 0x0080) !== 0,
    z: (flags >> 4) & 0x7,
    rcode: flags & 0xf,
    qdcount: buf.readUInt16BE(4),
    ancount: buf.readUInt16BE(6),
    nscount: buf.readUInt16BE(8),
    arcount: buf.readUInt16BE(10),
  };
}

export function writeHeader(h: Header): Buffer {
  const buf = Buffer.alloc(12);
  buf.writeUInt16BE(h.id & 0xffff, 0);
  const flags =
    (h.response ? 0x8000 : 0) |
    ((h.opcode & 0xf) << 11) |
    (h.authoritative ? 0x0400 : 0) |
    (h.truncated ? 0x0200 : 0) |
    (h.recursionDesired ? 0x0100 : 0) |
    (h.recursionAvailable ? 0x0080 : 0) |
    ((h.z & 0x7) << 4) |
    (h.rcode & 0xf);
  buf.writeUInt16BE(flags, 2);
  buf.writeUInt16BE(h.qdcount, 4);
  buf.writeUInt16BE(h.ancount, 6);
  buf.writeUInt16BE(h.nscount, 8);
  buf.writeUInt16BE(h.arcount, 10);
  return buf;
}

/** A (possibly compressed) name at `offset`: the name and the offset just after it. */
export function readName(buf: Buffer, offset: number): { name: string; next: number } {
  const labels: string[] = [];
  let pos = offset;
  let next = -1;
  let jumps = 0;
  let length = 0;
  for (;;) {
    if (pos >= buf.length) throw new WireError('name runs past the message');
    const len = buf[pos] as number;
    if ((len & 0xc0) === 0xc0) {
      if (pos + 1 >= buf.length) throw new WireError('pointer runs past the message');
      if (++jumps > MAX_POINTERS) throw new WireError('too many compression pointers');
      if (next < 0) next = pos + 2;
      const target = ((len & 0x3f) << 8) | (buf[pos + 1] as number);
      if (target >= pos) throw new WireError('compression pointer does not point back');
      pos = target;
      continue;
    }
    if ((len & 0xc0) !== 0) throw new WireError('unknown label type');
    if (len === 0) {
      if (next < 0) next = pos + 1;
      break;
    }
    if (pos + 1 + len > buf.length) throw new WireError('label runs past the message');
    length += len + 1;
    if (length > MAX_NAME) throw new WireError('name longer than 255 octets');
    labels.push(escapeLabel(buf.subarray(pos + 1, pos + 1 + len)));
    pos += 1 + len;
  }
  return { name: labels.join('.'), next };
}

/** A label as text: letters, digits, `-` and `_` as they are, dots and the rest escaped (`\DDD`). */
function escapeLabel(bytes: Buffer): string {
  let out = '';
  for (const b of bytes) {
    const plain = (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a);
    out += plain || b === 0x2d || b === 0x5f ? String.fromCharCode(b) : `\\${String(b).padStart(3, '0')}`;
  }
  return out;
}

/** A name in wire form, uncompressed (`\DDD` escapes as escapeLabel writes them). */
export function writeName(name: string): Buffer {
  const trimmed = name.endsWith('.') ? name.slice(0, -1) : name;
  const parts: Buffer[] = [];
  if (trimmed !== '') {
    for (const label of trimmed.split('.')) {
      const bytes = Buffer.from(
        label.replace(/\\(\d{3})/g, (_, d) => String.fromCharCode(Number(d))),
        'latin1',
      );
      if (bytes.length === 0 || bytes.length > MAX_LABEL) throw new WireError(`bad label in ${name}`);
      parts.push(Buffer.from([bytes.length]), bytes);
    }
  }
  parts.push(Buffer.from([0]));
  const out = Buffer.concat(parts);
  if (out.length > MAX_NAME) throw new WireError(`name longer than 255 octets: ${name}`);
  return out;
}

export function readQuestion(buf: Buffer, offset: number): { question: Question; next: number } {
  const { name, next } = readName(buf, offset);
  if (next + 4 > buf.length) throw new WireError('question runs past the message');
  return {
    question: { name, type: buf.readUInt16BE(next), class: buf.readUInt16BE(next + 2) },
    next: next + 4,
  };
}

export function writeQuestion(q: Question): Buffer {
  const tail = Buffer.alloc(4);
  tail.writeUInt16BE(q.type, 0);
  tail.writeUInt16BE(q.class, 2);
  return Buffer.concat([writeName(q.name), tail]);
}

export function readRecord(buf: Buffer, offset: number): { record: ResourceRecord; next: number } {
  const { name, next } = readName(buf, offset);
  if (next + 10 > buf.length) throw new WireError('record runs past the message');
  const length = buf.readUInt16BE(next + 8);
  const start = next + 10;
  if (start + length > buf.length) throw new WireError('record data runs past the message');
  return {
    record: {
      name,
      type: buf.readUInt16BE(next),
      class: buf.readUInt16BE(next + 2),
      ttl: buf.readUInt32BE(next + 4),
      data: buf.subarray(start, start + length),
    },
    next: start + length,
  };
}

export function writeRecord(r: ResourceRecord): Buffer {
  const fixed = Buffer.alloc(10);
  fixed.writeUInt16BE(r.type, 0);
  fixed.writeUInt16BE(r.class, 2);
  fixed.writeUInt32BE(r.ttl >>> 0, 4);
  fixed.writeUInt16BE(r.data.length, 8);
  return Buffer.concat([writeName(r.name), fixed, r.data]);
}

/**
 * A query as a client sends it: one question, and EDNS's OPT in the additional section (its class
 * is the payload size). Throws WireError when the message cannot be read.
 */
export function parseQuery(buf: Buffer): Query {
  const header = readHeader(buf);
  if (header.qdcount !== 1) throw new WireError(`${header.qdcount} questions`);
  const { question, next } = readQuestion(buf, 12);
  let pos = next;
  // answer and authority records (a client sends none; skipped), then the additional ones
  for (let i = 0; i < header.ancount + header.nscount; i++) pos = readRecord(buf, pos).next;
  let udpLimit = UDP_PLAIN_LIMIT;
  let edns = false;
  for (let i = 0; i < header.arcount; i++) {
    const { record, next: after } = readRecord(buf, pos);
    pos = after;
    if (record.type === TYPE.OPT) {
      edns = true;
      udpLimit = Math.min(Math.max(record.class, UDP_PLAIN_LIMIT), UDP_EDNS_LIMIT);
    }
  }
  return { header, question, udpLimit, edns };
}

/** EDNS's OPT pseudo-record: the payload size this side accepts, no options. */
export function optRecord(udpSize = UDP_EDNS_LIMIT): Buffer {
  return writeRecord({ name: '', type: TYPE.OPT, class: udpSize, ttl: 0, data: Buffer.alloc(0) });
}

/**
 * An answer to `q`: its header (response, RD copied, RA set), the question, `answers` (as many as
 * fit in `limit` octets; TC set when some did not), and OPT when the query had EDNS.
 */
export function buildResponse(
  q: Query,
  opts: { rcode: number; answers?: ResourceRecord[]; authoritative?: boolean; limit?: number },
): Buffer {
  const question = writeQuestion(q.question);
  const opt = q.edns ? optRecord() : undefined;
  const limit = opts.limit ?? Number.POSITIVE_INFINITY;
  const answers: Buffer[] = [];
  let size = 12 + question.length + (opt?.length ?? 0);
  let truncated = false;
  for (const r of opts.answers ?? []) {
    const bytes = writeRecord(r);
    if (size + bytes.length > limit) {
      truncated = true;
      break;
    }
    answers.push(bytes);
    size += bytes.length;
  }
  const header = writeHeader({
    id: q.header.id,
    response: true,
    opcode: q.header.opcode,
    authoritative: opts.authoritative ?? false,
    truncated,
    recursionDesired: q.header.recursionDesired,
    recursionAvailable: true,
    z: 0,
    rcode: opts.rcode,
    qdcount: 1,
    ancount: answers.length,
    nscount: 0,
    arcount: opt ? 1 : 0,
  });
  return Buffer.concat([header, question, ...answers, ...(opt ? [opt] : [])]);
}

/**
 * An error answer to a message that could not be read as a query (FORMERR, NOTIMP): its ID and
 * opcode, no question. Undefined when not even a query's header is there (then nothing is sent).
 */
export function errorResponse(buf: Buffer, rcode: number): Buffer | undefined {
  if (buf.length < 12) return undefined;
  const h = readHeader(buf);
  if (h.response) return undefined;
  return writeHeader({
    ...h,
    response: true,
    authoritative: false,
    truncated: false,
    recursionAvailable: true,
    z: 0,
    rcode,
    qdcount: 0,
    ancount: 0,
    nscount: 0,
    arcount: 0,
  });
}

/**
 * An answer from elsewhere (an upstream server) cut down to `limit` octets for a UDP client: the
 * header with TC set and the question, no records (RFC 2181 9: the client asks again over TCP).
 */
export function truncateResponse(buf: Buffer, limit: number): Buffer {
  if (buf.length <= limit) return buf;
  const h = readHeader(buf);
  const { next } = h.qdcount >= 1 ? readQuestion(buf, 12) : { next: 12 };
  return Buffer.concat([
    writeHeader({
      ...h,
      truncated: true,
      qdcount: Math.min(h.qdcount, 1),
      ancount: 0,
      nscount: 0,
      arcount: 0,
    }),
    buf.subarray(12, next),
  ]);
}

/** The 4 octets of an A record. */
export function ipv4Data(ip: string): Buffer {
  return Buffer.from(ip.split('.').map(Number));
}

/** The 16 octets of an AAAA record (`::` expanded, an IPv4 tail as `::ffff:1.2.3.4` read). */
export function ipv6Data(ip: string): Buffer {
  let text = ip;
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)?.[1];
  if (v4) {
    const b = ipv4Data(v4);
    text = `${text.slice(0, -v4.length)}${b.readUInt16BE(0).toString(16)}:${b.readUInt16BE(2).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const groups = (s: string) => (s === '' ? [] : s.split(':'));
  let parts = groups(head);
  if (tail !== undefined) {
    const end = groups(tail);
    parts = [...parts, ...Array<string>(Math.max(0, 8 - parts.length - end.length)).fill('0'), ...end];
  }
  const buf = Buffer.alloc(16);
  parts.slice(0, 8).forEach((p, i) => {
    buf.writeUInt16BE(Number.parseInt(p, 16) & 0xffff, i * 2);
  });
  return buf;
}
