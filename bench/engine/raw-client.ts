import { connect, type Socket } from 'node:net';
import { ResponseFramer } from '../common/http1.js';

/**
 * GET requests one after the other on one raw keep-alive connection to an engine socket: a
 * request is a ready buffer and a response is only framed, never parsed, so a request costs the
 * client a few microseconds where node's http client spends ~0.1-0.2 ms of its own. The list and
 * inspect figures then measure the engine, not the client. A connection the engine closed while
 * it was idle (the phases before take minutes) is opened again before the next request.
 */
export class RawEngineClient {
  private framer = new ResponseFramer();
  private waiting?: { resolve: (status: number) => void; reject: (err: Error) => void };
  private closed = false;

  private constructor(
    private readonly socketPath: string,
    private socket: Socket,
  ) {
    this.attach(socket);
  }

  private attach(socket: Socket): void {
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => {
      for (const status of this.framer.push(chunk)) {
        const w = this.waiting;
        this.waiting = undefined;
        w?.resolve(status);
      }
    });
    const fail = (err: Error) => {
      const w = this.waiting;
      this.waiting = undefined;
      w?.reject(err);
    };
    socket.on('error', fail);
    socket.on('close', () => {
      if (socket === this.socket) this.closed = true;
      fail(new Error('the engine closed the connection'));
    });
  }

  private static connect(socketPath: string): Promise<Socket> {
    return new Promise((resolve, reject) => {
      const socket = connect(socketPath, () => {
        socket.off('error', reject);
        resolve(socket);
      });
      socket.once('error', reject);
    });
  }

  static async open(socketPath: string): Promise<RawEngineClient> {
    return new RawEngineClient(socketPath, await RawEngineClient.connect(socketPath));
  }

  /** GET `path`; fails unless the status is 2xx. */
  async get(path: string): Promise<void> {
    if (this.waiting) throw new Error('one request at a time');
    if (this.closed || this.socket.destroyed) {
      this.socket = await RawEngineClient.connect(this.socketPath);
      this.framer = new ResponseFramer();
      this.closed = false;
      this.attach(this.socket);
    }
    const status = await new Promise<number>((resolve, reject) => {
      this.waiting = { resolve, reject };
      this.socket.write(`GET ${path} HTTP/1.1\r\nHost: engine\r\n\r\n`);
    });
    if (status < 200 || status >= 300) throw new Error(`GET ${path}: ${status}`);
  }

  close(): void {
    this.socket.destroy();
  }
}
