/**
 * A registry with deliberately faulty hooks, for the crash-guard tests:
 * `node --import tsx test/helpers/registry-faulty.ts '<config.yml-shaped JSON>'`. Prints
 * `listening <url>` on stdout once it serves; access log lines go to stdout too.
 *
 * Extra routes (outside /v2/) that fail in every way a handler can:
 *   /fault/sync          throws from the handler
 *   /fault/timer         throws from a timer while the handler is still busy
 *   /fault/emitter       an EventEmitter emits 'error' without a listener, same
 *   /fault/rejection     a promise nobody awaits rejects, same
 *   /fault/after-answer  answers 200, then throws from a timer
 *   /fault/close         answers 200; a listener of the response's `close` throws
 *   /fault/log           answers 200; the access log sink throws for its line
 *   /fault/destroy       destroys the socket, then throws from a timer
 */
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ExtraRoute } from '../../src/registry/app.js';
import { configFromObject } from '../../src/registry/config.js';
import { serveRegistry } from '../../src/registry/server.js';

class Fault extends Error {}

/** The handler is still busy when its fault comes (it would answer later, if at all). */
function stillWorking(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 300));
}

function ok(res: ServerResponse): void {
  res.setHeader('Content-Type', 'text/plain');
  res.end('ok');
}

const faults: Record<string, (req: IncomingMessage, res: ServerResponse) => void | Promise<void>> = {
  sync: () => {
    throw new Fault('thrown by the handler');
  },
  timer: async () => {
    setTimeout(() => {
      throw new Fault('thrown by a timer');
    }, 5);
    await stillWorking();
  },
  emitter: async () => {
    const e = new EventEmitter();
    setImmediate(() => e.emit('error', new Fault('emitted without a listener')));
    await stillWorking();
  },
  rejection: async () => {
    void Promise.resolve().then(() => {
      throw new Fault('an unhandled rejection');
    });
    await stillWorking();
  },
  'after-answer': (_req, res) => {
    ok(res);
    setTimeout(() => {
      throw new Fault('thrown after the answer');
    }, 5);
  },
  close: (_req, res) => {
    res.once('close', () => {
      throw new Fault('thrown by a close listener');
    });
    ok(res);
  },
  log: (_req, res) => ok(res),
  destroy: (req) => {
    req.socket.destroy();
    setTimeout(() => {
      throw new Fault('thrown after the socket is gone');
    }, 5);
  },
};

const extraRoutes: ExtraRoute[] = Object.entries(faults).map(([name, handler]) => ({
  method: ['GET', 'POST', 'PUT'],
  path: `/fault/${name}`,
  handler: async (req, res) => {
    await handler(req, res);
  },
}));

const config = configFromObject(JSON.parse(process.argv[2] ?? '{}'));
const running = await serveRegistry(config, {
  extraRoutes,
  accessLog: (line) => {
    if (line.includes('/fault/log')) throw new Fault('thrown by the access log');
    process.stdout.write(`${line}\n`);
  },
});
process.stdout.write(`listening ${running.url}\n`);
process.on('SIGTERM', () => {
  void running.close().then(() => process.exit(0));
});
