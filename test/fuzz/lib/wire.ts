import type { Rng } from './rng.js';

/**
 * Requests as bytes: the request line, the headers and the body framing, each as the generator
 * chose them, then mutated the ways a broken or hostile client sends them (bad Content-Length,
 * Content-Length with chunked, chunked garbage, huge headers, bare LF, pipelining...). Nothing
 * here sanitises: what is built is what goes on the socket.
 */

export interface RequestSpec {
  method: string;
  /** The request target as sent (origin-form path and query, or absolute-form, or garbage). */
  target: string;
  headers: Array<[string, string]>;
  body?: Buffer;
}

/** What a generator hands to the runner. */
export interface WireRequest {
  data: Buffer;
  /** The methods of the requests in `data`, in order (for HEAD answers). */
  methods: string[];
  /** Half-close after sending: the request is left unfinished on purpose. */
  halfClose: boolean;
  /** Closing without an answer is a fair reply (the request is unfinished or not HTTP). */
  mayClose: boolean;
  /** The answer may stream on (events, logs, attach): its head is enough. */
  streaming: boolean;
  /** The answer may legitimately take longer than the timeout (a wait on a running container). */
  mayBlock: boolean;
  /** Route template and what was mutated, for the report. */
  label: string;
}

export interface WireOptions {
  host: string;
  /** How likely the framing and headers are mutated (default 0.15). */
  mutateRate?: number;
}

function chunked(rng: Rng, body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  while (at < body.length) {
    const n = Math.min(body.length - at, rng.chance(0.5) ? rng.int(1, 64) : rng.int(1, 256 * 1024));
    const ext = rng.chance(0.05) ? ';name=value' : '';
    parts.push(Buffer.from(`${n.toString(16)}${ext}\r\n`), body.subarray(at, at + n), Buffer.from('\r\n'));
    at += n;
  }
  parts.push(Buffer.from(rng.chance(0.05) ? '0\r\nX-Trailer: 1\r\n\r\n' : '0\r\n\r\n'));
  return Buffer.concat(parts);
}

/** Chunked framing gone wrong; `incomplete` when the server should wait for more. */
function badChunked(rng: Rng, body: Buffer): { data: Buffer; incomplete: boolean } {
  const n = body.length;
  switch (rng.int(0, 9)) {
    case 0:
      return {
        data: Buffer.concat([Buffer.from(`zz\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]),
        incomplete: false,
      };
    case 1:
      return { data: Buffer.concat([Buffer.from(`${(n + 10).toString(16)}\r\n`), body]), incomplete: true };
    case 2: // a chunk far longer than what follows: the server waits for the rest
      return { data: Buffer.from('ffffffffffffffff\r\nabc\r\n'), incomplete: true };
    case 3:
      return { data: Buffer.concat([Buffer.from(`${n.toString(16)}\r\n`), body]), incomplete: true };
    case 4:
      return {
        data: Buffer.concat([Buffer.from(`${n.toString(16)}\r\n`), body, Buffer.from('XX0\r\n\r\n')]),
        incomplete: false,
      };
    case 5:
      return { data: Buffer.from(`-1\r\n\r\n0\r\n\r\n`), incomplete: false };
    case 6:
      return { data: Buffer.from(`1;${'e'.repeat(20_000)}\r\nx\r\n0\r\n\r\n`), incomplete: false };
    case 7:
      return {
        data: Buffer.concat([Buffer.from(`${n.toString(16)}\n`), body, Buffer.from('\n0\n\n')]),
        incomplete: false,
      };
    case 8:
      return { data: Buffer.from(`0\r\n${'X-T: y\r\n'.repeat(3000)}\r\n`), incomplete: false };
    default:
      return {
        data: Buffer.concat([Buffer.from(` ${n.toString(16)} \r\n`), body, Buffer.from('\r\n0\r\n\r\n')]),
        incomplete: false,
      };
  }
}

const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'HEAD', 'PATCH', 'OPTIONS', 'TRACE', 'CONNECT'];

/** Another method: a real one, a made-up one, or not a token. */
export function otherMethod(rng: Rng): string {
  return rng.weighted([
    [rng.pick(METHODS), 6],
    [rng.pick(['get', 'Post', 'PROPFIND', 'MKCOL', 'PURGE', 'SEARCH', 'QUERY', 'LINK']), 2],
    [rng.pick(['', 'G ET', 'GET\t', 'X'.repeat(300), 'GE\u0000T', 'ÄÖ']), 1],
  ]);
}

/**
 * The bytes of a request, framed as the spec says or (at the mutation rate) not. Returns whether
 * the server may close without answering (the request is unfinished or not HTTP) and whether the
 * client should half-close.
 */
export function serialize(
  rng: Rng,
  spec: RequestSpec,
  opts: WireOptions,
): { data: Buffer; halfClose: boolean; mayClose: boolean; mutated: string[] } {
  const mutated: string[] = [];
  const mutate = (what: string, p: number) => {
    const yes = rng.chance(p);
    if (yes) mutated.push(what);
    return yes;
  };
  const rate = opts.mutateRate ?? 0.15;
  let version = 'HTTP/1.1';
  let eol = '\r\n';
  let mayClose = false;
  let halfClose = false;
  if (mutate('version', rate * 0.2))
    version = rng.pick([
      'HTTP/1.0',
      'HTTP/2.0',
      'HTTP/0.9',
      'HTTP/1.2',
      'HTTP/1.x',
      'http/1.1',
      'HTTP/11',
      '',
    ]);
  if (version !== 'HTTP/1.1' && version !== 'HTTP/1.0') mayClose = true;
  if (mutate('bare LF', rate * 0.1)) {
    eol = '\n';
    mayClose = true;
  }
  const headers: Array<[string, string]> = [['Host', opts.host], ...spec.headers];
  if (mutate('host', rate * 0.3)) {
    const i = 0;
    const choice = rng.int(0, 5);
    if (choice === 0) headers.splice(i, 1);
    else if (choice === 1) headers.push(['Host', 'other.example']);
    else if (choice === 2) (headers[i] as [string, string])[1] = 'x'.repeat(rng.pick([300, 9000]));
    else if (choice === 3)
      (headers[i] as [string, string])[1] = rng.pick(['', ' ', 'a b', '[::1', 'h:99999', '@', '%00']);
    else if (choice === 4) (headers[i] as [string, string])[1] = 'localhost:1';
    else (headers[i] as [string, string])[1] = '\u00ff\u00fe';
  }
  const body = spec.body;
  let framing: 'length' | 'chunked' | 'none' = body && body.length > 0 ? 'length' : 'none';
  if (body && spec.method !== 'GET' && rng.chance(0.1)) framing = 'chunked';
  let bodyBytes = body ?? Buffer.alloc(0);
  if (framing === 'length') headers.push(['Content-Length', String(bodyBytes.length)]);
  if (framing === 'chunked') {
    headers.push(['Transfer-Encoding', 'chunked']);
    bodyBytes = chunked(rng, bodyBytes);
  }
  if (mutate('framing', rate)) {
    let broken = true;
    const raw = body ?? Buffer.from('{"a":1}');
    const strip = () => {
      for (let i = headers.length - 1; i >= 0; i--) {
        const k = (headers[i] as [string, string])[0].toLowerCase();
        if (k === 'content-length' || k === 'transfer-encoding') headers.splice(i, 1);
      }
    };
    strip();
    switch (rng.int(0, 13)) {
      case 0: // declared more than sent: the server waits; the client gives up
        headers.push(['Content-Length', String(raw.length + rng.int(1, 100_000))]);
        bodyBytes = raw;
        halfClose = true;
        break;
      case 1: // declared less: the rest is the next "request"
        headers.push(['Content-Length', String(Math.max(0, raw.length - rng.int(1, 10)))]);
        bodyBytes = raw;
        break;
      case 2:
        headers.push([
          'Content-Length',
          rng.pick(['-1', 'abc', '1e3', '0x10', ' 5', '5 5', '+5', '99999999999999999999', '', '1,2', '٣']),
        ]);
        bodyBytes = raw;
        break;
      case 3:
        headers.push(['Content-Length', String(raw.length)], ['Content-Length', String(raw.length + 1)]);
        bodyBytes = raw;
        break;
      case 4:
        headers.push(['Content-Length', String(raw.length)], ['Transfer-Encoding', 'chunked']);
        bodyBytes = chunked(rng, raw);
        break;
      case 5:
        headers.push(['Transfer-Encoding', 'chunked'], ['Content-Length', String(raw.length)]);
        bodyBytes = raw;
        break;
      case 6: {
        headers.push(['Transfer-Encoding', 'chunked']);
        const bad = badChunked(rng, raw);
        bodyBytes = bad.data;
        halfClose = bad.incomplete;
        break;
      }
      case 7:
        headers.push([
          'Transfer-Encoding',
          rng.pick([
            'gzip, chunked',
            'chunked, gzip',
            'identity',
            'xchunked',
            'chunked, chunked',
            'CHUNKED',
            'chunked;x=1',
            ' chunked',
          ]),
        ]);
        bodyBytes = chunked(rng, raw);
        break;
      case 8: // a body and no framing at all: the bytes are the next request
        bodyBytes = raw;
        break;
      case 9:
        headers.push(['Content-Length', String(raw.length)], ['Content-Length', String(raw.length)]);
        bodyBytes = raw;
        break;
      case 10: // chunked announced, nothing sent
        headers.push(['Transfer-Encoding', 'chunked']);
        bodyBytes = Buffer.alloc(0);
        halfClose = true;
        break;
      case 11:
        headers.push(['Expect', '100-continue'], ['Content-Length', String(raw.length)]);
        bodyBytes = raw;
        broken = false;
        break;
      case 12:
        headers.push(['Content-Length', '0']);
        bodyBytes = Buffer.alloc(0);
        broken = false;
        break;
      default:
        headers.push(['Transfer-Encoding', 'chunked']);
        bodyBytes = Buffer.concat([
          chunked(rng, raw).subarray(0, -5),
          Buffer.from('0\r\nbroken trailer\r\n\r\n'),
        ]);
        break;
    }
    if (broken) mayClose = true;
  }
  if (mutate('headers', rate)) {
    let broken = true;
    switch (rng.int(0, 11)) {
      case 0:
        headers.push(['X-Big', 'x'.repeat(rng.pick([8000, 17_000, 70_000]))]);
        break;
      case 1:
        for (let i = 0; i < rng.pick([100, 1000, 3000]); i++) headers.push([`X-H${i}`, 'v']);
        break;
      case 2:
        headers.push(['Bad Name', 'v']);
        break;
      case 3:
        headers.push(['X-Nul', 'a\u0000b']);
        break;
      case 4:
        headers.push(['X-Fold', `a${eol} folded`]);
        break;
      case 5:
        headers.push(['', 'empty name']);
        break;
      case 6:
        headers.push(['X-Ctl', '\u0001\u007f']);
        break;
      case 7:
        headers.push(['Connection', rng.pick(['close', 'keep-alive', 'Upgrade', 'x, y', ''])]);
        broken = false;
        break;
      case 8:
        headers.push(['Upgrade', rng.pick(['tcp', 'websocket', 'h2c', 'x'])], ['Connection', 'Upgrade']);
        broken = false;
        break;
      case 9:
        headers.push([
          'Content-Type',
          rng.pick([
            'text/plain',
            'application/json; charset=latin1',
            '',
            '/',
            'application/json\u0000',
            'x'.repeat(5000),
          ]),
        ]);
        broken = false;
        break;
      case 10:
        headers.push(['X-Latin1', '\u00e9\u00ff']);
        broken = false;
        break;
      default:
        headers.push([
          'Accept',
          rng.pick([
            '*/*',
            'application/json',
            'application/x-ndjson',
            'application/json-seq',
            'text/html;q=0.x',
            '',
          ]),
        ]);
        broken = false;
        break;
    }
    if (broken) mayClose = true;
  }
  let requestLine = `${spec.method} ${spec.target} ${version}`;
  if (mutate('request line', rate * 0.1)) {
    mayClose = true;
    requestLine = rng.pick([
      `${spec.method}  ${spec.target} ${version}`,
      `${spec.method} ${spec.target}`,
      `${spec.method} ${spec.target} ${version} extra`,
      `${spec.method}\t${spec.target}\t${version}`,
      ` ${spec.method} ${spec.target} ${version}`,
      `${spec.method} ${spec.target.replace(/ /g, '%20')} ${version}`,
      `${spec.method} * ${version}`,
      `${spec.method} localhost:80 ${version}`,
      'GARBAGE',
      '',
    ]);
  }
  const head = `${requestLine}${eol}${headers.map(([k, v]) => `${k}: ${v}${eol}`).join('')}${eol}`;
  return { data: Buffer.concat([Buffer.from(head, 'latin1'), bodyBytes]), halfClose, mayClose, mutated };
}

/** Does the target hold anything a server cannot take as a request target (spaces, controls)? */
export function targetBreaksRequestLine(target: string): boolean {
  return /[\s\u0000-\u001f\u007f]/.test(target) || /[^\u0000-\u00ff]/.test(target);
}
