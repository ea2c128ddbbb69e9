import { AsyncLocalStorage } from 'node:async_hooks';
import { errorMessage } from '../common/errors.js';
import type { Logger } from '../common/log.js';

/**
 * The last line of "no request ends a server": an exception no handler caught (thrown in a timer
 * or a stream callback a handler set up, a promise nobody awaited) is logged and, when it can be
 * traced to the request whose handler set that work up, that request alone fails: answered 500 if
 * its socket still stands, cut otherwise. The process keeps serving.
 *
 * Tracing uses the async context of the request's handler (timers, promises and callbacks it
 * schedules carry it); a callback of an emitter made before the request (its socket's events)
 * does not, and such an error is logged without a request.
 */
export interface RequestScope {
  /** `METHOD url`, for the log. */
  label: string;
  /** Fail the request: a 500 answer when none was started, else a cut connection. */
  fail(err: unknown): void;
}

const scopes = new AsyncLocalStorage<RequestScope>();

/** Run a request's handling in its scope, so that errors escaping it later are traced to it. */
export function runInRequestScope<T>(scope: RequestScope, fn: () => T): T {
  return scopes.run(scope, fn);
}

let installedWith: Logger | undefined;

/**
 * Install the process-wide handlers (once per process; later calls keep the first logger). Call
 * it from a server's composition root once it listens, never from a library a test loads: it
 * replaces node's "print and exit" for uncaught errors.
 */
export function installCrashGuard(log: Logger): void {
  if (installedWith) return;
  installedWith = log;
  const onError = (what: string) => (err: unknown) => {
    const scope = scopes.getStore();
    log.error(`${what}; the server keeps serving`, {
      error: errorMessage(err),
      ...(scope ? { request: scope.label } : {}),
      stack: err instanceof Error ? err.stack : undefined,
    });
    if (!scope) return;
    try {
      scope.fail(err);
    } catch (failErr) {
      log.error('could not fail the request', { error: errorMessage(failErr) });
    }
  };
  process.on('uncaughtException', onError('uncaught exception'));
  process.on('unhandledRejection', onError('unhandled promise rejection'));
}
