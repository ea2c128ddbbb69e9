import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The transport to one etcd 3.4 member's v3 JSON gateway (grpc-gateway over the client
 * listener): POST of a JSON body, a JSON answer; errors as `{error, code, message}` with an HTTP
 * status. No gRPC: keys and values travel base64, int64 fields as JSON strings (etcd-store.ts
 * converts). A member reached over its unix socket needs no TLS; one over https shows a client
 * certificate.
 */
export type GatewayEndpoint =
  | { socketPath: string }
  | { url: string; tls: { ca: string; cert: string; key: string } };

/** A gateway error: etcd's gRPC code and message, or a transport failure (code -1). */
export class EtcdError extends Error {
  constructor(
    message: string,
    readonly code: number,
    readonly status: number,
  ) {
    super(message);
    this.name = 'EtcdError';
  }
}

/**
 * Answers that say "try again shortly": a member added within seconds of the last one, or a
 * learner promoted before it caught up (`unhealthy cluster`), and an election under way.
 */
const RETRYABLE = [
  'etcdserver: unhealthy cluster',
  'etcdserver: leader changed',
  'etcdserver: too many requests',
];

export interface GatewayOptions {
  /** How long a unary call may take in all, retries included (default 10 s). */
  timeoutMs?: number;
  /** First retry delay, doubled each time (default 100 ms, at most 1.6 s). */
  retryDelayMs?: number;
}

export class EtcdGateway {
  private readonly agent: HttpAgent;
  private readonly timeoutMs: number;
  private readonly retryDelayMs: number;

  constructor(
    private readonly endpoint: GatewayEndpoint,
    opts: GatewayOptions = {},
  ) {
    this.agent =
      'socketPath' in endpoint
        ? new HttpAgent({ keepAlive: true })
        : new HttpsAgent({ keepAlive: true, ...endpoint.tls, minVersion: 'TLSv1.2' });
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.retryDelayMs = opts.retryDelayMs ?? 100;
  }

  /** One unary call; retries the retryable answers with backoff until the time is up. */
  async call<T>(path: string, body: unknown): Promise<T> {
    const deadline = Date.now() + this.timeoutMs;
    let delay = this.retryDelayMs;
    for (;;) {
      try {
        const res = await this.open(path, body, Math.max(1, deadline - Date.now()));
        return JSON.parse((await readAll(res)).toString('utf8')) as T;
      } catch (err) {
        if (!(err instanceof EtcdError) || !RETRYABLE.some((m) => err.message.includes(m))) throw err;
        if (Date.now() + delay >= deadline) throw err;
        await sleep(delay);
        delay = Math.min(delay * 2, 1600);
      }
    }
  }

  /**
   * A call whose answer is a stream of JSON objects, one per line (watch), or that may take long
   * (campaign): no timeout. `signal` aborts it.
   */
  async stream(path: string, body: unknown, signal?: AbortSignal): Promise<IncomingMessage> {
    return this.open(path, body, 0, signal);
  }

  close(): void {
    this.agent.destroy();
  }

  private open(
    path: string,
    body: unknown,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<IncomingMessage> {
    const payload = Buffer.from(JSON.stringify(body));
    const headers = { 'Content-Type': 'application/json', 'Content-Length': String(payload.length) };
    return new Promise((resolve, reject) => {
      const onResponse = (res: IncomingMessage) => {
        if (res.statusCode === 200) {
          resolve(res);
          return;
        }
        readAll(res).then(
          (buf) => reject(gatewayError(res.statusCode ?? 0, buf)),
          (err: Error) => reject(new EtcdError(err.message, -1, res.statusCode ?? 0)),
        );
      };
      const req =
        'socketPath' in this.endpoint
          ? httpRequest(
              {
                agent: this.agent,
                socketPath: this.endpoint.socketPath,
                path,
                method: 'POST',
                headers,
                signal,
              },
              onResponse,
            )
          : httpsRequest(
              new URL(path, this.endpoint.url),
              { agent: this.agent as HttpsAgent, method: 'POST', headers, signal },
              onResponse,
            );
      if (timeoutMs > 0) {
        req.setTimeout(timeoutMs, () =>
          req.destroy(new Error(`etcd did not answer ${path} in ${timeoutMs} ms`)),
        );
      }
      req.on('error', (err) => reject(new EtcdError(`etcd ${path}: ${err.message}`, -1, 0)));
      req.end(payload);
    });
  }
}

function gatewayError(status: number, buf: Buffer): EtcdError {
  try {
    const body = JSON.parse(buf.toString('utf8')) as { error?: string; message?: string; code?: number };
    return new EtcdError(body.message ?? body.error ?? `etcd answered ${status}`, body.code ?? -1, status);
  } catch {
    return new EtcdError(`etcd answered ${status}: ${buf.toString('utf8').slice(0, 200)}`, -1, status);
  }
}

async function readAll(res: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
