import { createHash } from 'node:crypto';

/** The little of RFC 6455 that attach/ws needs: the handshake key and frame (de)coding. */

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

export function acceptKey(key: string): string {
  return createHash('sha1')
    .update(key + GUID)
    .digest('base64');
}

export const OP_TEXT = 0x1;
export const OP_BINARY = 0x2;
export const OP_CLOSE = 0x8;
export const OP_PING = 0x9;
export const OP_PONG = 0xa;

/** A server frame (never masked), FIN set. */
export function encodeFrame(opcode: number, payload: Uint8Array): Buffer {
  const len = payload.length;
  let header: Buffer;
  if (len < 126) {
    header = Buffer.from([0x80 | opcode, len]);
  } else if (len < 65536) {
    header = Buffer.alloc(4);
    header[0] = 0x80 | opcode;
    header[1] = 126;
    header.writeUInt16BE(len, 2);
  } else {
    header = Buffer.alloc(10);
    header[0] = 0x80 | opcode;
    header[1] = 127;
    header.writeBigUInt64BE(BigInt(len), 2);
  }
  return Buffer.concat([header, payload]);
}

export interface WsFrame {
  fin: boolean;
  opcode: number;
  payload: Buffer;
}

/** Decodes frames from a byte stream (client frames are masked; unmasked ones are accepted too). */
export class FrameReader {
  private buf = Buffer.alloc(0);

  push(chunk: Uint8Array): WsFrame[] {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : Buffer.from(chunk);
    const out: WsFrame[] = [];
    for (;;) {
      if (this.buf.length < 2) break;
      const b0 = this.buf[0] ?? 0;
      const b1 = this.buf[1] ?? 0;
      let len = b1 & 0x7f;
      let off = 2;
      if (len === 126) {
        if (this.buf.length < 4) break;
        len = this.buf.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        if (this.buf.length < 10) break;
        len = Number(this.buf.readBigUInt64BE(2));
        off = 10;
      }
      const masked = (b1 & 0x80) !== 0;
      const maskOff = off;
      if (masked) off += 4;
      if (this.buf.length < off + len) break;
      const payload = Buffer.from(this.buf.subarray(off, off + len));
      if (masked) {
        for (let i = 0; i < payload.length; i++)
          payload[i] = (payload[i] ?? 0) ^ (this.buf[maskOff + (i % 4)] ?? 0);
      }
      out.push({ fin: (b0 & 0x80) !== 0, opcode: b0 & 0x0f, payload });
      this.buf = this.buf.subarray(off + len);
    }
    return out;
  }
}
