import { Agent, request } from 'node:http';

/** A minimal keep-alive HTTP client for an engine socket, shared by the benchmarks. */
export class EngineClient {
  private readonly agent: Agent;

  constructor(readonly socketPath: string) {
    this.agent = new Agent({ keepAlive: true, maxSockets: 64 });
  }

  call(
    method: string,
    path: string,
    body?: unknown,
    onData?: (chunk: Buffer) => void,
  ): Promise<{ status: number; body: Buffer }> {
    return new Promise((resolve, reject) => {
      const payload =
        body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
      const headers: Record<string, string> = {};
      if (payload) {
        headers['Content-Length'] = String(payload.length);
        headers['Content-Type'] = Buffer.isBuffer(body) ? 'application/x-tar' : 'application/json';
      }
      const req = request(
        { socketPath: this.socketPath, agent: this.agent, method, path, headers },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (d: Buffer) => (onData ? onData(d) : chunks.push(d)));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  }

  async ok(method: string, path: string, body?: unknown): Promise<Buffer> {
    const r = await this.call(method, path, body);
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${r.body.toString()}`);
    return r.body;
  }

  close(): void {
    this.agent.destroy();
  }
}
