import type { ExchangeResult } from './exchange.js';
import type { ParsedResponse } from './response-parser.js';
import type { WireRequest } from './wire.js';

/**
 * What fails a run, for one exchange (docs/testing.md, "Fuzzing"):
 * - bytes that are not HTTP;
 * - a 5xx the server does not give on purpose (`deliberate` says which it does; a 500 never is);
 * - no answer within the timeout (a hang), or an answer whose body never finishes, unless the
 *   route streams (events, logs, attach) or may block (wait);
 * - the connection closed or reset without an answer to a request that was whole and well
 *   formed (a request left unfinished or not HTTP on purpose may be closed without one), or
 *   closed in the middle of an answer that does not stream (unless the client half-closed an
 *   unfinished request: then the connection is gone either way).
 * The server's exit is checked by the runner.
 */

export type Deliberate = (res: ParsedResponse, req: WireRequest) => boolean;

export function judge(req: WireRequest, r: ExchangeResult, deliberate: Deliberate): string | undefined {
  if (r.parseError) return `the answer is not valid HTTP: ${r.parseError}`;
  // answers past the requests sent (the leftover of a body taken as a next request) are only
  // held to being HTTP
  const finals = r.responses.filter((x) => x.status >= 200 || x.status === 101).slice(0, req.methods.length);
  for (const res of finals) {
    if (res.status >= 500 && !deliberate(res, req))
      return `${res.status} ${res.reason}: ${res.body.subarray(0, 2000).toString('utf8')}`;
  }
  const mid = finals.find((x) => !x.complete);
  if (r.timedOut) {
    if (finals.length === 0)
      return req.mayBlock ? undefined : `no answer within the timeout (${r.elapsedMs} ms)`;
    if (mid && !req.streaming && !req.mayBlock)
      return `the answer's body did not finish within the timeout (${mid.bodyLength} bytes came)`;
    // a request sent after the first on the same connection, left unanswered on an open connection
    const answered = finals.filter((x) => x.complete).length;
    // (not when the client stopped sending at an early answer: the next request never went out)
    const excused = req.streaming || req.mayBlock || req.mayClose || req.halfClose || r.upgraded || r.unsent;
    if (answered < req.methods.length && !excused)
      return `request ${answered + 1} of the ${req.methods.length} sent on the connection got no answer within the timeout (the connection left open)`;
    return undefined;
  }
  if (finals.length === 0) {
    if (req.mayClose || req.halfClose) return undefined;
    // an answer that switched protocols or streams has nothing more to say
    if (r.upgraded) return undefined;
    return r.socketError
      ? `connection reset without an answer (${r.socketError})`
      : 'connection closed without an answer';
  }
  // a request the client half-closed unfinished may lose its answer's body with the connection
  if (mid && !req.streaming && !req.halfClose) {
    return `the connection ${r.socketError ? `was reset (${r.socketError})` : 'closed'} in the middle of the answer (${mid.bodyLength} bytes of the body came)`;
  }
  return undefined;
}

/** The bytes of a request as a JSON string (latin1), cut at `max` characters. */
export function showBytes(data: Buffer, max = 4000): string {
  const text = data.toString('latin1');
  if (text.length <= max) return JSON.stringify(text);
  return `${JSON.stringify(text.slice(0, max))} ... (${data.length} bytes in all)`;
}
