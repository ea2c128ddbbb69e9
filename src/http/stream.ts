import type { ServerResponse } from 'node:http';
import type { Duplex, Writable } from 'node:stream';

/** Stream ids of Docker's multiplexed stdio framing. */
export const STDIN = 0;
export const STDOUT = 1;
export const STDERR = 2;

/** One frame: 8-byte header (stream id, 3 zero bytes, big-endian payload length), then the payload. */
export function frame(stream: number, payload: Uint8Array): Buffer {
  const header = Buffer.alloc(8);
  header[0] = stream;
  header.writeUInt32BE(payload.length, 4);
  return Buffer.concat([header, payload]);
}

/** Splits a multiplexed byte stream back into frames (for clients and tests). */
export class FrameDecoder {
  private pending = Buffer.alloc(0);

  push(chunk: Uint8Array): Array<{ stream: number; payload: Buffer }> {
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : Buffer.from(chunk);
    const out: Array<{ stream: number; payload: Buffer }> = [];
    while (this.pending.length >= 8) {
      const size = this.pending.readUInt32BE(4);
      if (this.pending.length < 8 + size) break;
      out.push({ stream: this.pending[0] ?? 0, payload: this.pending.subarray(8, 8 + size) });
      this.pending = this.pending.subarray(8 + size);
    }
    return out;
  }
}

/** A JSON-lines progress stream as Docker clients read it (pull, push, import, load, build). */
export class JsonMessageStream {
  private ended = false;

  constructor(private readonly out: Writable) {}

  write(message: Record<string, unknown>): void {
    if (this.ended || this.out.destroyed) return;
    this.out.write(`${JSON.stringify(message)}\r\n`);
  }

  status(status: string, id?: string): void {
    this.write(id === undefined ? { status } : { status, id });
  }

  progress(id: string, status: string, current: number, total?: number): void {
    const detail: Record<string, number> = { current };
    if (total !== undefined) detail.total = total;
    this.write({ status, progressDetail: detail, progress: progressBar(current, total), id });
  }

  stream(text: string): void {
    this.write({ stream: text });
  }

  /** Errors after the 200 header went out travel in-band, as Docker does. */
  error(message: string, code?: number): void {
    const errorDetail: Record<string, unknown> = { message };
    if (code !== undefined) errorDetail.code = code;
    this.write({ errorDetail, error: message });
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.out.end();
  }
}

/**
 * The `progress` text of a JSON message as dockerd renders it (jsonmessage.JSONProgress.String
 * with no terminal: width 200): a 50-column bar, then `%8v/%v` of human sizes; without a total,
 * the current size alone.
 */
export function progressBar(current: number, total?: number): string {
  if (current <= 0 && (!total || total <= 0)) return '';
  if (!total || total <= 0) return humanSize(current).padStart(8);
  const percentage = Math.min(50, Math.trunc(Math.trunc((current / total) * 100) / 2));
  const bar = `[${'='.repeat(percentage)}>${' '.repeat(Math.max(0, 50 - percentage))}] `;
  const numbers =
    current > total
      ? humanSize(current).padStart(8)
      : `${humanSize(current).padStart(8)}/${humanSize(total)}`;
  return bar + numbers;
}

/** go-units' HumanSize: decimal units, 4 significant digits (`36.45kB`, `3.001MB`, `512B`). */
export function humanSize(n: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB', 'EB', 'ZB', 'YB'];
  let value = n;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit++;
  }
  return `${goG4(value)}${units[unit]}`;
}

/** Go's `%.4g` for values below 1000 (what HumanSize prints). */
function goG4(v: number): string {
  if (v === 0) return '0';
  const s = v.toPrecision(4);
  return s.includes('e') ? String(Number(s)) : s.includes('.') ? s.replace(/\.?0+$/, '') : s;
}

/** Start a streaming JSON response (200, chunked). */
export function startJsonStream(res: ServerResponse, contentType = 'application/json'): JsonMessageStream {
  res.statusCode = 200;
  res.setHeader('Content-Type', contentType);
  res.flushHeaders();
  return new JsonMessageStream(res);
}

/**
 * Take over a connection for a raw bidirectional stream. With `upgrade` the answer is
 * `101 UPGRADED`, otherwise `200 OK`; either way the socket then carries the raw stream. The socket
 * stays writable after the client half-closes (the docker CLI does that when it has no stdin).
 */
export function hijack(
  socket: Duplex,
  upgrade: boolean,
  headers: Record<string, string>,
  contentType = 'application/vnd.docker.raw-stream',
): void {
  const lines = [upgrade ? 'HTTP/1.1 101 UPGRADED' : 'HTTP/1.1 200 OK', `Content-Type: ${contentType}`];
  if (upgrade) lines.push('Connection: Upgrade', 'Upgrade: tcp');
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  socket.write(`${lines.join('\r\n')}\r\n\r\n`);
}
