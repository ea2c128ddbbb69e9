import { connect, type Socket } from 'node:net';
import { ResponseFramer } from '../common/http1.js';

/**
 * GET requests one after the other on one raw keep-alive connection to an engine socket: a
 * request is a ready buffer and a response is only framed, never parsed, so a request costs the
 * client a few microseconds where node's http client spends ~0.1-0.2 ms of its own. The list and
 * inspect figures then measure the engine, not the client.
 */
export class RawEngineClient {
  private readonly framer = new ResponseFramer();
  private waiting?: { resolve: (status: number) => void; reject: (err: Error) => void };

  private constructor(private readonly socket: Socket) {
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
    socket.on('close', () => fail(new Error('the engine closed the connection')));
  }

  static open(socketPath: string): Promise<RawEngineClient> {
    return new Promise((resolve, reject) => {
      const socket = connect(socketPath, () => {
        socket.off('error', reject);
        resolve(new RawEngineClient(socket));
      });
      socket.once('error', reject);
    });
  }

  /** GET `path`; fails unless the status is 2xx. */
  get(path: string): Promise<void> {
    if (this.waiting) return Promise.reject(new Error('one request at a time'));
    return new Promise<number>((resolve, reject) => {
      this.waiting = { resolve, reject };
      this.socket.write(`GET ${path} HTTP/1.1\r\nHost: engine\r\n\r\n`);
    }).then((status) => {
      if (status < 200 || status >= 300) throw new Error(`GET ${path}: ${status}`);
    });
  }

  close(): void {
    this.socket.destroy();
  }
}
