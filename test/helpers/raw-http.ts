import { request } from 'node:http';
import { connect, type Socket } from 'node:net';

/** Where a raw connection goes: a TCP port on loopback or a unix socket path. */
export type RawTarget = { port: number; host?: string } | { path: string };

/**
 * A raw client connection, for what HTTP clients will not send (half requests, stalls, huge
 * headers): bytes in, everything received kept, the close observed. Every wait is bounded.
 */
export class RawConnection {
  private chunks: Buffer[] = [];
  /** Set once the server closed (or reset) the connection. */
  closedAt?: number;
  error?: string;
  readonly closed: Promise<void>;

  private constructor(readonly socket: Socket) {
    socket.on('data', (d: Buffer) => this.chunks.push(d));
    socket.on('error', (e) => {
      this.error = e.message;
    });
    this.closed = new Promise((resolve) =>
      socket.on('close', () => {
        this.closedAt = Date.now();
        resolve();
      }),
    );
  }

  static open(target: RawTarget): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const socket =
        'path' in target ? connect(target.path) : connect(target.port, target.host ?? '127.0.0.1');
      socket.once('connect', () => resolve(new RawConnection(socket)));
      socket.once('error', reject);
    });
  }

  write(data: string | Buffer): void {
    this.socket.write(data);
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('latin1');
  }

  /** The status of the first response received, or undefined. */
  status(): number | undefined {
    const m = /^HTTP\/1\.1 (\d{3})/.exec(this.text());
    return m ? Number(m[1]) : undefined;
  }

  /** Wait until the received text matches, the connection closes, or `ms` pass; true when it matched. */
  async waitFor(pattern: RegExp, ms: number): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      if (pattern.test(this.text())) return true;
      if (this.closedAt !== undefined) return pattern.test(this.text());
      await new Promise((r) => setTimeout(r, 10));
    }
    return pattern.test(this.text());
  }

  /** Wait for the server to close the connection, at most `ms`; true when it did. */
  async waitClosed(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((r) => {
      timer = setTimeout(() => r(false), ms);
    });
    const done = await Promise.race([this.closed.then(() => true as const), timeout]);
    clearTimeout(timer);
    return done;
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/** One whole request on a fresh connection; resolves with what came back once the server closed or `ms` passed. */
export async function rawExchange(target: RawTarget, data: string | Buffer, ms = 5000): Promise<string> {
  const c = await RawConnection.open(target);
  c.write(data);
  await c.waitClosed(ms);
  c.destroy();
  return c.text();
}

/** GET / of a loopback port through node's client: the body, or '' when nothing answers (2 s). */
export function getLoopbackText(port: number): Promise<string> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/', timeout: 2000 }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => {
        text += d.toString();
      });
      res.on('end', () => resolve(text));
      res.on('error', () => resolve(''));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(''));
    req.end();
  });
}
