import { request } from 'node:https';
import type { AssignmentMessage } from './assignments.types.js';
import { type ClientTls, checkManager } from './client.js';

/**
 * An agent's end of `GET /v1/assignments`: one https request to a manager, its JSON lines handed
 * to `onMessage` one by one. The stream is over (`done` settles) when the manager ends it, the
 * connection breaks, `close()` is called, or no line came for `idleMs` (a dead link: the manager
 * pings every heartbeat period).
 */
export interface AssignmentsStream {
  done: Promise<void>;
  /** Changes the idle limit (once the manager has told its period). */
  setIdle(ms: number): void;
  close(): void;
}

export function openAssignments(
  addr: string,
  tls: Required<ClientTls>,
  onMessage: (m: AssignmentMessage) => void,
  idleMs: number,
): AssignmentsStream {
  let idle = idleMs;
  let timer: NodeJS.Timeout | undefined;
  let req: ReturnType<typeof request> | undefined;
  const done = new Promise<void>((resolve, reject) => {
    const arm = () => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => req?.destroy(new Error(`no word from ${addr} in ${idle} ms`)), idle);
      timer.unref();
    };
    const finish = (err?: Error) => {
      if (timer) clearTimeout(timer);
      if (err) reject(err);
      else resolve();
    };
    req = request(new URL(`https://${addr}/v1/assignments`), {
      method: 'GET',
      ca: tls.ca,
      cert: tls.cert,
      key: tls.key,
      checkServerIdentity: checkManager,
      minVersion: 'TLSv1.2',
      agent: false,
    });
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let message = text;
          try {
            message = (JSON.parse(text) as { message?: string }).message ?? text;
          } catch {}
          finish(new Error(`${addr} refused the assignments stream (${res.statusCode}): ${message}`));
        });
        return;
      }
      let buffered = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        arm();
        buffered += chunk;
        for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
          const line = buffered.slice(0, nl).trim();
          buffered = buffered.slice(nl + 1);
          if (line === '') continue;
          try {
            onMessage(JSON.parse(line) as AssignmentMessage);
          } catch (err) {
            req?.destroy(err instanceof Error ? err : new Error(String(err)));
            return;
          }
        }
      });
      res.on('end', () => finish());
      res.on('error', (err) => finish(err));
      res.on('close', () => finish(new Error(`${addr} closed the assignments stream`)));
    });
    req.on('error', (err) => finish(err));
    req.on('close', () => finish(new Error(`the assignments stream from ${addr} ended`)));
    arm();
    req.end();
  });
  return {
    done,
    setIdle(ms) {
      idle = ms;
    },
    close() {
      req?.destroy();
    },
  };
}
