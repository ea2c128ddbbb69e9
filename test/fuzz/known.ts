import type { ExchangeResult } from './lib/exchange.js';
import type { WireRequest } from './lib/wire.js';

/**
 * Defects the fuzzers found in code another piece of work owns, while that work is under way.
 * Each says who fixes it, what shows it, and how a run treats it meanwhile:
 * - `avoid`: the generator's requests of that shape are not sent (the defect would end the server
 *   or the run); counted in the summary as left out;
 * - `symptom`: a failure with that look is counted as known instead of failing the run.
 * `--known` sends and fails them all the same. Each also has a reproducer in the corpus
 * (corpus.ts), run as a TODO test until the entry here is deleted. Delete an entry once its fix
 * is merged (the corpus case then has to pass).
 */

export interface KnownDefect {
  id: string;
  server: 'engine' | 'registry';
  /** Who fixes it (the piece of work, then the file). */
  owner: string;
  what: string;
  avoid?: (req: WireRequest) => boolean;
  symptom?: (reason: string, req: WireRequest, result: ExchangeResult) => boolean;
}

function requestLine(req: WireRequest): { method: string; target: string } {
  const line =
    req.data.subarray(0, Math.min(req.data.length, 100_000)).toString('latin1').split('\r\n')[0] ?? '';
  // node takes several spaces between the parts as one
  const [method = '', target = ''] = line.split(/ +/);
  return { method, target };
}

/** The target's path, percent-decoded where it can be, without the query. */
function pathOf(req: WireRequest): string {
  const { target } = requestLine(req);
  const path = target.split('?')[0] ?? '';
  try {
    return decodeURIComponent(path);
  } catch {
    return path;
  }
}

function headerOf(req: WireRequest, name: string): string | undefined {
  const head = req.data.subarray(0, Math.max(0, req.data.indexOf('\r\n\r\n'))).toString('latin1');
  const m = new RegExp(`\\r\\n${name}:\\s*([^\\r\\n]*)`, 'i').exec(head);
  return m?.[1];
}

export const KNOWN_DEFECTS: KnownDefect[] = [
  {
    id: 'engine-connect-method',
    server: 'engine',
    owner: 'frontdoor (src/http/server.ts)',
    what:
      'a CONNECT request (any target) gets no answer: node closes the connection (the server has no ' +
      "'connect' listener); dockerd answers it like any other method",
    avoid: (req) => requestLine(req).method === 'CONNECT',
  },
  {
    id: 'engine-invalid-url-hang',
    server: 'engine',
    owner: 'frontdoor (src/engine/api/server.ts, splitUrl)',
    what:
      "a target such as `//~*;='~@!@/./x` makes splitUrl's `new URL(path, 'http://engine')` throw " +
      "(TypeError: Invalid URL) outside the handler's try: 'unhandled request error' is logged and " +
      'the request is never answered (the client hangs)',
    // splitUrl's way with such a path, as it is today
    avoid: (req) => {
      const path = requestLine(req).target.split('?')[0] ?? '';
      if (path.startsWith('/') && !path.includes('/.')) return false;
      try {
        new URL(path, 'http://engine');
        return false;
      } catch {
        return true;
      }
    },
  },
  {
    id: 'engine-upgrade-on-plain-routes',
    server: 'engine',
    owner: 'frontdoor (src/http/server.ts, createExchangeServer: the upgrade handler)',
    what:
      'a request with `Connection: Upgrade` and any `Upgrade:` to a route that does not take the connection over ' +
      'is answered through a ServerResponse bound to the raw upgraded socket, with no error or close wiring. ' +
      '(1) A write after the client left raises EPIPE as an unhandled error event and the engine process exits: ' +
      '`GET /events` with `Upgrade: tcp`, the client reads the head and leaves, then any request that makes an event ' +
      '(a container create). (2) A streaming answer whose client left never ends: `GET /containers/<id>/export` with ' +
      "`Upgrade: x`, the client leaves after 150 ms, the tar blocks, the export keeps the container's lock, and a later " +
      '`DELETE /containers/<id>`, prune or restart of that container never answers',
    avoid: (req) =>
      /^upgrade$/i.test(headerOf(req, 'connection')?.trim() ?? '') &&
      headerOf(req, 'upgrade') !== undefined &&
      !/\/(attach|attach\/ws|exec\/[^/]+\/start)$/.test(pathOf(req)),
  },
  {
    id: 'engine-archive-bad-tar-500',
    server: 'engine',
    owner: 'tars (src/engine/containers/archive/copy.ts)',
    what:
      "PUT /containers/{id}/archive with a tar whose header is broken (a size field that is not octal: tar-stream's " +
      "'Invalid tar header. Maybe the tar is corrupted or it needs to be gunzipped?') answers 500; bad input is a 400",
    symptom: (reason, req) =>
      /^500 /.test(reason) &&
      /\/archive$/.test(pathOf(req)) &&
      /Invalid tar header|Unexpected end of data|tar/i.test(reason),
  },
  {
    id: 'registry-connect-method',
    server: 'registry',
    owner: 'registry (src/registry/server.ts)',
    what:
      "a CONNECT request (any target) gets no answer: node's http server closes the connection when it has no " +
      "'connect' listener; the reference registry answers it (405/404)",
    avoid: (req) => requestLine(req).method === 'CONNECT',
  },
  {
    id: 'registry-upgrade-stops-the-connection',
    server: 'registry',
    owner: 'registry (src/registry/server.ts)',
    what:
      'after a request with `Connection: Upgrade` and an `Upgrade:` header (answered as a plain request: node has no ' +
      "'upgrade' listener), node parses nothing more on the connection and keeps it open: a request pipelined after " +
      'it (or sent next on the kept-alive connection) is never answered. The reference registry (Go) ignores the ' +
      'Upgrade and keeps serving',
    avoid: (req) =>
      req.methods.length > 1 &&
      /^upgrade$/i.test(headerOf(req, 'connection')?.trim() ?? '') &&
      headerOf(req, 'upgrade') !== undefined,
  },
  {
    id: 'registry-absolute-form-404',
    server: 'registry',
    owner: 'registry (src/registry/app.ts)',
    what:
      'an absolute-form request target (`GET http://127.0.0.1:5000/v2/ HTTP/1.1`) answers 404 where the reference ' +
      'registry serves the path (not a failure of the random runs: a 404 is an answer; the corpus case expects 200)',
  },
  {
    id: 'registry-chunked-manifest-crash',
    server: 'registry',
    owner: 'registry (src/registry/**)',
    what:
      'a manifest PUT of about 5 MB with Transfer-Encoding: chunked gets 413 and the process dies within a few ' +
      "such requests (TypeError: Cannot read properties of null (reading 'remoteAddress') in the access log line)",
    avoid: (req) => {
      const { method, target } = requestLine(req);
      return (
        method === 'PUT' &&
        /\/manifests\//.test(target) &&
        /chunked/i.test(headerOf(req, 'transfer-encoding') ?? '') &&
        req.data.length > 4 * 1024 * 1024
      );
    },
  },
];

export function knownFor(server: 'engine' | 'registry'): KnownDefect[] {
  return KNOWN_DEFECTS.filter((k) => k.server === server);
}
