/** A small DER reader: enough to take a PKCS#10 request apart (csr.ts). */

export interface DerElement {
  tag: number;
  /** The whole element, header included. */
  raw: Buffer;
  content: Buffer;
}

/** The element at `offset` of `buf`; throws on anything truncated or longer than the buffer. */
export function readElement(buf: Buffer, offset = 0): DerElement {
  if (offset + 2 > buf.length) throw new Error('DER: truncated');
  const tag = buf[offset] as number;
  let len = buf[offset + 1] as number;
  let header = 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4 || offset + 2 + n > buf.length) throw new Error('DER: bad length');
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + (buf[offset + 2 + i] as number);
    header += n;
  }
  const end = offset + header + len;
  if (end > buf.length) throw new Error('DER: truncated');
  return { tag, raw: buf.subarray(offset, end), content: buf.subarray(offset + header, end) };
}

/** The elements inside a constructed element (a SEQUENCE, a SET, an explicit tag). */
export function children(el: DerElement): DerElement[] {
  const out: DerElement[] = [];
  for (let off = 0; off < el.content.length; ) {
    const child = readElement(el.content, off);
    out.push(child);
    off += child.raw.length;
  }
  return out;
}
