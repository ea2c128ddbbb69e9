import { connect, type Socket } from 'node:net';
import { ResponseFramer } from '../common/http1.js';

/**
 * A lean closed-loop HTTP/1.1 load generator on raw keep-alive sockets: each connection sends
 * one request, reads the whole response, sends the next. Cheap enough per request that the
 * server, not the client, is what is measured.
 */
export interface LoadResult {
  requests: number;
  errors: number;
  statuses: Record<number, number>;
  seconds: number;
  perSecond: number;
  p50ms: number;
  p99ms: number;
}

export async function runLoad(options: {
  host: string;
  port: number;
  method: 'GET' | 'HEAD';
  path: string;
  headers?: Record<string, string>;
  connections: number;
  durationMs: number;
  /** Stop after this many requests in all, whatever the time. */
  maxRequests?: number;
}): Promise<LoadResult> {
  const head = [
    `${options.method} ${options.path} HTTP/1.1`,
    `Host: ${options.host}:${options.port}`,
    'Connection: keep-alive',
  ];
  for (const [k, v] of Object.entries(options.headers ?? {})) head.push(`${k}: ${v}`);
  const request = Buffer.from(`${head.join('\r\n')}\r\n\r\n`);
  const isHead = options.method === 'HEAD';
  const maxRequests = options.maxRequests ?? 5_000_000;
  const latencies: number[] = [];
  const statuses: Record<number, number> = {};
  let requests = 0;
  let errors = 0;
  const start = performance.now();
  const deadline = start + options.durationMs;

  const one = (): Promise<void> =>
    new Promise((resolve) => {
      let socket: Socket;
      const framer = new ResponseFramer(isHead);
      let sentAt = 0;
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        socket.destroy();
        resolve();
      };
      const send = () => {
        if (performance.now() >= deadline || requests + errors >= maxRequests) return finish();
        sentAt = performance.now();
        socket.write(request);
      };
      socket = connect(options.port, options.host, send);
      socket.setNoDelay(true);
      socket.on('error', () => {
        errors++;
        finish();
      });
      socket.on('close', finish);
      socket.on('data', (chunk: Buffer) => {
        for (const status of framer.push(chunk)) {
          statuses[status] = (statuses[status] ?? 0) + 1;
          if (status >= 200 && status < 300) requests++;
          else errors++;
          latencies.push(performance.now() - sentAt);
          send();
        }
      });
    });

  await Promise.all(Array.from({ length: options.connections }, one));
  const seconds = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  const pct = (p: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor((latencies.length * p) / 100))] ?? 0;
  return {
    requests,
    errors,
    statuses,
    seconds,
    perSecond: requests / seconds,
    p50ms: pct(50),
    p99ms: pct(99),
  };
}
