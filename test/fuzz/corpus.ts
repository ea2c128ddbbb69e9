import { header, type ParsedResponse } from './lib/response-parser.js';
import { checkOne, type Fuzzer, type FuzzTarget } from './lib/runner.js';
import type { WireRequest } from './lib/wire.js';
import { AUTH } from './registry/world.js';

/**
 * Requests the fuzzers found that once failed, kept as bytes and sent before every CI run
 * (engine.fuzz.test.ts, registry.fuzz.test.ts) to the same fresh servers and fixtures: each must
 * pass the run's verdict (lib/verdict.ts) and its own `expect`. A case with `known` is a defect
 * of known.ts (someone else's code, under repair): it runs as a TODO test until the entry in
 * known.ts and the mark here are deleted.
 */

export interface CorpusStep {
  /** The request bytes; `{authority}` is the server's host:port (registry). */
  bytes: () => Buffer;
  halfClose?: boolean;
  /** The answer streams: its head is enough, then the client leaves. */
  streaming?: boolean;
  /** What the answer must be beyond the verdict (undefined: fine). */
  expect?: (res: ParsedResponse | undefined) => string | undefined;
  /** A shorter timeout than the run's (a hang to be seen quickly). */
  timeoutMs?: number;
  /** How many requests the bytes hold (pipelined; default 1), each to be answered. */
  requests?: number;
}

export interface CorpusCase extends Partial<CorpusStep> {
  name: string;
  server: 'engine' | 'registry';
  /** Several requests in order, each judged (instead of `bytes`). */
  steps?: CorpusStep[];
  /** The id of a known defect (known.ts): a TODO test until fixed. */
  known?: string;
  /** Send it to a server of its own (it may end the server or leave it unwell). */
  ownServer?: boolean;
}

const text = (s: string) => () => Buffer.from(s, 'latin1');

function status(want: number) {
  return (res: ParsedResponse | undefined) =>
    res?.status === want ? undefined : `expected ${want}, got ${res?.status ?? 'no answer'}`;
}

function json(method: string, path: string, body: string, host = 'localhost'): () => Buffer {
  return () =>
    Buffer.from(
      `${method} ${path} HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
}

/** A tar of one entry whose size field is not octal. */
function brokenTar(): Buffer {
  const h = Buffer.alloc(512);
  h.write('fz-file', 0, 'latin1');
  h.write('0000644\0', 100, 'latin1');
  h.write('zzzzzzzzzzz\0', 124, 'latin1');
  h.write('ustar\u000000', 257, 'latin1');
  return Buffer.concat([h, Buffer.alloc(1024)]);
}

export const CORPUS: CorpusCase[] = [
  // engine: fixed
  {
    name: 'a restart with t=2^64 is refused, not waited on for ever',
    server: 'engine',
    bytes: text(
      'POST /containers/fz-running/restart?t=18446744073709551616 HTTP/1.1\r\nHost: localhost\r\n\r\n',
    ),
    expect: status(400),
  },
  {
    name: 'a stop with t=9007199254740993 is refused',
    server: 'engine',
    bytes: text(
      'POST /v1.41/containers/fz-running/stop?t=9007199254740993 HTTP/1.1\r\nHost: localhost\r\n\r\n',
    ),
    expect: status(400),
  },
  {
    name: 'a malformed local volume size is a 400',
    server: 'engine',
    bytes: json('POST', '/volumes/create', '{"Name":"fz-bad-size","DriverOpts":{"size":"abc"}}'),
    expect: status(400),
  },
  {
    name: 'a real-time runtime the kernel refuses is a 400 on update',
    server: 'engine',
    bytes: json('POST', '/v1.27/containers/fz-running/update', '{"CpuRealtimeRuntime":93278924}'),
    expect: status(400),
  },
  {
    name: "int64's largest memory limit reaches runc",
    server: 'engine',
    bytes: json(
      'POST',
      '/v1.51/containers/fz-running/update',
      '{"Memory":9223372036854775807,"MemorySwap":-1}',
    ),
    expect: status(200),
  },
  {
    name: "int64's largest memory limit without a swap limit (twice it: no int64) reaches runc",
    server: 'engine',
    bytes: json('POST', '/v1.56/containers/fz-tty/update', '{"Memory":9223372036854775807}'),
    expect: status(200),
  },
  {
    name: "cpu-shares above runc's bound are a 400 on update",
    server: 'engine',
    bytes: json('POST', '/v1.47/containers/fz-running/update', '{"CpuShares":9223372036854775807}'),
    expect: status(400),
  },
  {
    name: 'NanoCpus with a CPU quota in one update is a 400',
    server: 'engine',
    bytes: json('POST', '/v1.30/containers/fz-running/update', '{"NanoCpus":743806953,"CpuQuota":-1}'),
    expect: status(400),
  },
  {
    name: 'a negative CPU quota at -2^63 reaches runc',
    server: 'engine',
    bytes: json('POST', '/containers/fz-running/update', '{"CpuQuota":-9223372036854775808}'),
    expect: status(200),
  },
  {
    name: 'a negative real-time period is refused at create',
    server: 'engine',
    bytes: json(
      'POST',
      '/containers/create',
      '{"Image":"busybox","HostConfig":{"CpuRealtimePeriod":-9223372036854775808}}',
    ),
    expect: status(400),
  },
  {
    name: 'a path longer than a file name may be is a 400 (docker cp)',
    server: 'engine',
    bytes: text(
      `GET /containers/fz-tty/archive?path=${'x'.repeat(5000)} HTTP/1.1\r\nHost: localhost\r\n\r\n`,
    ),
    expect: status(400),
  },
  {
    name: "a command runc quotes (a tab) that is not found is the user's error at start",
    server: 'engine',
    steps: [
      {
        bytes: json('POST', '/containers/create?name=fz-tab-cmd', '{"Image":"busybox","Cmd":["\\t"]}'),
        expect: status(201),
      },
      {
        bytes: text('POST /containers/fz-tab-cmd/start HTTP/1.1\r\nHost: localhost\r\n\r\n'),
        expect: status(400),
      },
      {
        bytes: text('DELETE /containers/fz-tab-cmd HTTP/1.1\r\nHost: localhost\r\n\r\n'),
        expect: status(204),
      },
    ],
  },
  // engine: found in the first runs, fixed since
  {
    name: 'a CONNECT request is answered',
    server: 'engine',
    bytes: text('CONNECT /_ping HTTP/1.1\r\nHost: localhost\r\n\r\n'),
  },
  {
    name: 'a target that is not a URL is answered',
    server: 'engine',
    bytes: text("OPTIONS //~*;='~@!@/./constructor HTTP/1.1\r\nHost: localhost\r\n\r\n"),
  },
  {
    name: 'an Upgrade request to /events whose client left does not end the engine at the next event',
    server: 'engine',
    ownServer: true,
    steps: [
      {
        bytes: text('GET /events HTTP/1.1\r\nHost: localhost\r\nUpgrade: tcp\r\nConnection: Upgrade\r\n\r\n'),
        streaming: true,
      },
      { bytes: json('POST', '/volumes/create', '{"Name":"fz-after-upgrade"}'), expect: status(201) },
      { bytes: text('GET /_ping HTTP/1.1\r\nHost: localhost\r\n\r\n'), expect: status(200) },
    ],
  },
  {
    name: 'an Upgrade export whose client left does not keep the container locked',
    server: 'engine',
    ownServer: true,
    steps: [
      {
        bytes: json(
          'POST',
          '/containers/create?name=fz-export-upgrade',
          '{"Image":"busybox","Cmd":["true"]}',
        ),
        expect: status(201),
      },
      {
        bytes: text(
          'GET /v1.45/containers/fz-export-upgrade/export HTTP/1.1\r\nHost: localhost\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n',
        ),
        streaming: true,
      },
      {
        bytes: text('DELETE /containers/fz-export-upgrade HTTP/1.1\r\nHost: localhost\r\n\r\n'),
        expect: status(204),
        timeoutMs: 5000,
      },
    ],
  },
  {
    name: 'a broken tar into docker cp is a 400',
    server: 'engine',
    bytes: () =>
      Buffer.concat([
        Buffer.from(
          `PUT /containers/fz-created/archive?path=%2Ftmp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-tar\r\nContent-Length: ${brokenTar().length}\r\n\r\n`,
        ),
        brokenTar(),
      ]),
  },
  {
    name: 'a bad chunk in a load whose answer has begun ends the connection (never waited on for ever)',
    server: 'engine',
    bytes: text(
      'POST /images/load?tag=a%2F%2Fb HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n\r\n0\r\n\r\n',
    ),
  },
  // registry: found in the first runs, fixed since
  {
    name: 'a CONNECT request is answered',
    server: 'registry',
    bytes: text(`CONNECT /v2/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${AUTH}\r\n\r\n`),
  },
  {
    name: 'a request that asks to upgrade is answered plainly, then the connection closes (never left open unanswered)',
    server: 'registry',
    bytes: text(
      `GET /v2/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${AUTH}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nGET /v2/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${AUTH}\r\n\r\n`,
    ),
    requests: 2,
    timeoutMs: 3000,
    expect: (res) =>
      res?.status !== 200
        ? `expected 200, got ${res?.status ?? 'no answer'}`
        : !/close/i.test(header(res, 'connection') ?? '')
          ? 'the answer does not say the connection closes'
          : undefined,
  },
  {
    name: 'an absolute-form target is served as its path',
    server: 'registry',
    bytes: text(`GET http://{authority}/v2/ HTTP/1.1\r\nHost: {authority}\r\nAuthorization: ${AUTH}\r\n\r\n`),
    expect: status(200),
  },
  {
    name: 'a 5 MB chunked manifest PUT by a logged-in user gets a 413 and the registry lives on',
    server: 'registry',
    ownServer: true,
    bytes: () => {
      const body = Buffer.from(JSON.stringify({ schemaVersion: 2, pad: 'x'.repeat(5 * 1024 * 1024) }));
      const chunks: Buffer[] = [];
      for (let at = 0; at < body.length; at += 64 * 1024) {
        const part = body.subarray(at, at + 64 * 1024);
        chunks.push(Buffer.from(`${part.length.toString(16)}\r\n`), part, Buffer.from('\r\n'));
      }
      return Buffer.concat([
        Buffer.from(
          `PUT /v2/fz/one/manifests/big HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${AUTH}\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nTransfer-Encoding: chunked\r\n\r\n`,
        ),
        ...chunks,
        Buffer.from('0\r\n\r\n'),
      ]);
    },
    expect: status(413),
  },
];

/** The steps of a case (one for a case of one request). */
export function corpusSteps(c: CorpusCase): CorpusStep[] {
  if (c.steps) return c.steps;
  if (!c.bytes) throw new Error(`corpus case ${c.name} has no bytes`);
  return [
    {
      bytes: c.bytes,
      halfClose: c.halfClose,
      streaming: c.streaming,
      expect: c.expect,
      timeoutMs: c.timeoutMs,
      requests: c.requests,
    },
  ];
}

/** A step as the runner sends it. */
export function corpusRequest(c: CorpusStep, name: string, authority = ''): WireRequest {
  const data = Buffer.from(c.bytes().toString('latin1').replaceAll('{authority}', authority), 'latin1');
  const method = data.subarray(0, 16).toString('latin1').split(' ')[0] ?? 'GET';
  return {
    data,
    // pipelined requests after the first are GETs in the corpus
    methods: [method, ...Array.from({ length: (c.requests ?? 1) - 1 }, () => 'GET')],
    halfClose: c.halfClose ?? false,
    mayClose: false,
    streaming: c.streaming ?? false,
    mayBlock: false,
    label: name,
  };
}

/** Send a case's steps in order, each judged as a run judges its requests; the first failure. */
export async function checkCase(
  target: FuzzTarget,
  fuzzer: Pick<Fuzzer, 'deliberate'>,
  c: CorpusCase,
  opts: { authority?: string; timeoutMs: number },
): Promise<string | undefined> {
  const steps = corpusSteps(c);
  for (const [i, step] of steps.entries()) {
    const req = corpusRequest(step, c.name, opts.authority);
    const why = await checkOne(target, fuzzer, req, step.timeoutMs ?? opts.timeoutMs, step.expect);
    if (why) return steps.length > 1 ? `step ${i + 1}: ${why}` : why;
  }
  return undefined;
}
