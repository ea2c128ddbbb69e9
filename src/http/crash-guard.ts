/**
 * A request's crash guard: an exception nobody catches while a request's code runs (a timer, an
 * event listener, an emitter without an 'error' listener, a promise nobody awaits) ends that
 * request, never the server process.
 *
 * `guardRequest(fault, fn)` runs a request handler in an AsyncLocalStorage context; everything it
 * starts (timers, listeners, promise continuations) inherits it. One process-wide listener of
 * `uncaughtException` and `unhandledRejection` (installed while at least one server holds
 * `installCrashGuard()`) finds the request an exception belongs to and calls its `fault`
 * callback: log it, answer 500 when the socket still stands and nothing was sent, else cut the
 * response. An exception that belongs to no guarded request is left to the process's other
 * listeners, or, when there are none, ends the process as Node would (printed, exit code 1).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { inspect } from 'node:util';

export type FaultOrigin = 'uncaughtException' | 'unhandledRejection' | 'handler';

/** What a server says about one request when code of it throws where nobody catches. */
export interface RequestFault {
  req: IncomingMessage;
  res: ServerResponse;
  /** Log the fault (with the request). */
  log(err: unknown, origin: FaultOrigin): void;
  /** Answer the fault in the server's error format (called only while nothing was sent). */
  answer(err: unknown): void;
}

const current = new AsyncLocalStorage<RequestFault>();
let holders = 0;

/** Run `fn` (a request handler) guarded: what it throws, now or later, ends only its request. */
export function guardRequest(fault: RequestFault, fn: () => void): void {
  current.run(fault, () => {
    try {
      fn();
    } catch (err) {
      endFaultyRequest(fault, err, 'handler');
    }
  });
}

/** Log a fault and end its request: a 500 when nothing was sent and the socket stands, else cut. */
export function endFaultyRequest(fault: RequestFault, err: unknown, origin: FaultOrigin): void {
  try {
    fault.log(err, origin);
  } catch {
    // a failing logger must not end the process either
  }
  const { req, res } = fault;
  try {
    const socket = res.socket;
    if (!res.headersSent && !res.writableEnded && !res.destroyed && socket && !socket.destroyed) {
      // A body we did not read must not keep the connection: close it after the answer.
      if (!req.complete) res.shouldKeepAlive = false;
      fault.answer(err);
    } else if (!res.writableFinished && !res.destroyed) {
      res.destroy();
    }
  } catch {
    try {
      res.destroy();
    } catch {
      // nothing left to end
    }
  }
}

function onUncaught(err: unknown): void {
  handleProcessFault(err, 'uncaughtException');
}

function onRejection(reason: unknown): void {
  handleProcessFault(reason, 'unhandledRejection');
}

function handleProcessFault(err: unknown, origin: 'uncaughtException' | 'unhandledRejection'): void {
  const fault = current.getStore();
  if (fault) {
    endFaultyRequest(fault, err, origin);
    return;
  }
  // Not a request's: whoever else listens decides; without anyone, end as Node would.
  if (process.listenerCount(origin) > 1) return;
  process.stderr.write(`${origin === 'unhandledRejection' ? 'Unhandled rejection: ' : ''}${inspect(err)}\n`);
  process.exit(1);
}

/**
 * Hold the process-wide listeners while a server runs; the returned function releases them (the
 * last holder removes them, so a process that stops its servers is back to Node's defaults).
 */
export function installCrashGuard(): () => void {
  if (holders++ === 0) {
    process.on('uncaughtException', onUncaught);
    process.on('unhandledRejection', onRejection);
  }
  let released = false;
  return () => {
    if (released) return;
    released = true;
    if (--holders === 0) {
      process.off('uncaughtException', onUncaught);
      process.off('unhandledRejection', onRejection);
    }
  };
}
