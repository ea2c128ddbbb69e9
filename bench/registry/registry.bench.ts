/**
 * Registry benchmark: berth's registry beside the reference registry (distribution).
 *
 *   node --import tsx bench/registry/registry.bench.ts [--reference http://127.0.0.1:PORT]
 *        [--no-reference] [--berth http://127.0.0.1:PORT] [--blob-mib 256] [--chunk-mib 8]
 *        [--seconds 5] [--connections 32] [--repeat 3] [--node-flags '--max-semi-space-size=2']
 *
 * Starts berth's registry as a child process on loopback with a temporary root (unless --berth
 * names a running one) and, when /usr/bin/docker-registry exists (or --reference is given), a
 * reference registry likewise; stops what it started by PID. Measures blob GET, monolithic and
 * chunked upload throughput, manifest GET and blob HEAD rates under concurrent keep-alive
 * connections, the server's CPU time for a blob GET, and its RSS idle and under load. berth runs
 * with the V8 flags docs/registry.md recommends (BERTH_NODE_FLAGS; `--node-flags ''` for none).
 * Every loop is bounded.
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomFillSync } from 'node:crypto';
import { existsSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runLoad } from './load.js';
import {
  BERTH_NODE_FLAGS,
  cpuMsOf,
  external,
  REFERENCE_BINARY,
  rssOf,
  startBerth,
  startReference,
  type Target,
} from './targets.js';

interface Options {
  berth?: string;
  reference?: string;
  noReference: boolean;
  blobMiB: number;
  chunkMiB: number;
  seconds: number;
  connections: number;
  repeat: number;
  nodeFlags?: string[];
}

function parseOptions(argv: string[]): Options {
  const o: Options = {
    noReference: false,
    blobMiB: 256,
    chunkMiB: 8,
    seconds: 5,
    connections: 32,
    repeat: 2,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    const num = () => {
      const n = Number(next());
      if (!Number.isFinite(n) || n <= 0) throw new Error(`${a} needs a positive number`);
      return n;
    };
    if (a === '--berth') o.berth = next();
    else if (a === '--reference') o.reference = next();
    else if (a === '--no-reference') o.noReference = true;
    else if (a === '--blob-mib') o.blobMiB = Math.min(2048, num());
    else if (a === '--chunk-mib') o.chunkMiB = Math.min(256, num());
    else if (a === '--seconds') o.seconds = Math.min(60, num());
    else if (a === '--connections') o.connections = Math.min(512, Math.floor(num()));
    else if (a === '--repeat') o.repeat = Math.min(10, Math.floor(num()));
    else if (a === '--node-flags') o.nodeFlags = next().split(/\s+/).filter(Boolean);
    else throw new Error(`unknown option ${a}`);
  }
  return o;
}

const MiB = 1024 * 1024;
const agent = new Agent({ keepAlive: true, maxSockets: 8 });

function call(
  target: Target,
  method: string,
  path: string,
  body?: Buffer,
  headers: Record<string, string> = {},
  sink = false,
): Promise<{
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  bytes: number;
}> {
  return new Promise((resolvePromise, reject) => {
    const url = path.startsWith('http') ? new URL(path) : new URL(path, target.url);
    const h: Record<string, string> = { ...headers };
    if (body) h['Content-Length'] = String(body.length);
    else if (method === 'PUT' || method === 'POST' || method === 'PATCH') h['Content-Length'] = '0';
    const req = request(
      { host: url.hostname, port: url.port, path: url.pathname + url.search, method, headers: h, agent },
      (res) => {
        const chunks: Buffer[] = [];
        let bytes = 0;
        res.on('data', (d: Buffer) => {
          bytes += d.length;
          if (!sink) chunks.push(d);
        });
        res.on('end', () =>
          resolvePromise({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks),
            bytes,
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function expect(r: { status: number; body: Buffer }, status: number, what: string): void {
  if (r.status !== status)
    throw new Error(`${what}: expected ${status}, got ${r.status} ${r.body.toString().slice(0, 300)}`);
}

const sha = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

async function startUpload(t: Target, repo: string): Promise<string> {
  const r = await call(t, 'POST', `/v2/${repo}/blobs/uploads/`);
  expect(r, 202, 'start upload');
  return String(r.headers.location);
}

const withQuery = (location: string, q: string) => `${location}${location.includes('?') ? '&' : '?'}${q}`;

/** Flush dirty pages first, so one measurement does not pay for the writes of the one before. */
function settle(): void {
  spawnSync('sync', [], { stdio: 'ignore', timeout: 60_000 });
}

async function monolithic(t: Target, repo: string, data: Buffer, digest: string): Promise<number> {
  settle();
  const t0 = performance.now();
  const location = await startUpload(t, repo);
  const r = await call(t, 'PUT', withQuery(location, `digest=${digest}`), data, {
    'Content-Type': 'application/octet-stream',
  });
  expect(r, 201, 'monolithic upload');
  return (performance.now() - t0) / 1000;
}

async function chunked(
  t: Target,
  repo: string,
  data: Buffer,
  digest: string,
  chunk: number,
): Promise<number> {
  const t0 = performance.now();
  let location = await startUpload(t, repo);
  for (let off = 0; off < data.length; off += chunk) {
    const part = data.subarray(off, Math.min(data.length, off + chunk));
    const r = await call(t, 'PATCH', location, part, {
      'Content-Type': 'application/octet-stream',
      'Content-Range': `${off}-${off + part.length - 1}`,
    });
    expect(r, 202, `chunk at ${off}`);
    location = String(r.headers.location);
  }
  const r = await call(t, 'PUT', withQuery(location, `digest=${digest}`));
  expect(r, 201, 'finish chunked upload');
  return (performance.now() - t0) / 1000;
}

async function pushSmallImage(t: Target, repo: string): Promise<string> {
  const config = Buffer.from(
    JSON.stringify({ architecture: 'amd64', os: 'linux', rootfs: { type: 'layers', diff_ids: [] } }),
  );
  const layer = Buffer.alloc(1024, 7);
  for (const blob of [config, layer]) {
    const location = await startUpload(t, repo);
    expect(await call(t, 'PUT', withQuery(location, `digest=${sha(blob)}`), blob), 201, 'small blob');
  }
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: {
        mediaType: 'application/vnd.oci.image.config.v1+json',
        digest: sha(config),
        size: config.length,
      },
      layers: [
        { mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: sha(layer), size: layer.length },
      ],
    }),
  );
  const r = await call(t, 'PUT', `/v2/${repo}/manifests/latest`, manifest, {
    'Content-Type': 'application/vnd.oci.image.manifest.v1+json',
  });
  expect(r, 201, 'manifest push');
  return sha(layer);
}

interface Figures {
  blobGetMiBs: number;
  /** The server's CPU time for one whole blob GET (the lowest of the runs), ms. */
  blobGetCpuMs: number;
  monoMiBs: number;
  chunkedMiBs: number;
  manifestRps: number;
  headRps: number;
  manifestP99: number;
  headP99: number;
  rssIdle: number;
  rssLoad: number;
  errors: number;
}

/**
 * Measure every target phase by phase, alternating between them inside each phase, so that both
 * see the same background load of this shared machine (a target measured a minute later can
 * meet a very different machine).
 */
async function measureAll(targets: Target[], o: Options): Promise<Map<Target, Figures>> {
  const size = o.blobMiB * MiB;
  const figures = new Map<Target, Figures>();
  const log = (t: Target, s: string) => process.stderr.write(`[${t.name}] ${s}\n`);
  await new Promise((r) => setTimeout(r, 1000));
  for (const t of targets) {
    const idle = rssOf(t.pid);
    figures.set(t, {
      blobGetMiBs: 0,
      blobGetCpuMs: 0,
      monoMiBs: 0,
      chunkedMiBs: 0,
      manifestRps: 0,
      headRps: 0,
      manifestP99: 0,
      headP99: 0,
      rssIdle: idle,
      rssLoad: idle,
      errors: 0,
    });
  }
  const fig = (t: Target) => figures.get(t)!;
  const sampler = setInterval(() => {
    for (const t of targets) fig(t).rssLoad = Math.max(fig(t).rssLoad, rssOf(t.pid));
  }, 100);
  try {
    const data = Buffer.allocUnsafe(size);
    randomFillSync(data);
    const lastDigest = new Map<Target, string>();
    let serial = 0;
    for (let i = 0; i < o.repeat; i++) {
      for (const t of targets) {
        data.writeUInt32BE(++serial, 0);
        const d1 = sha(data);
        fig(t).monoMiBs = Math.max(
          fig(t).monoMiBs,
          o.blobMiB / (await monolithic(t, 'bench/blobs', data, d1)),
        );
        lastDigest.set(t, d1);
        data.writeUInt32BE(++serial, 0);
        const d2 = sha(data);
        fig(t).chunkedMiBs = Math.max(
          fig(t).chunkedMiBs,
          o.blobMiB / (await chunked(t, 'bench/blobs', data, d2, o.chunkMiB * MiB)),
        );
      }
    }
    for (const t of targets) {
      log(
        t,
        `upload: monolithic ${fig(t).monoMiBs.toFixed(0)} MiB/s, chunked ${fig(t).chunkedMiBs.toFixed(0)} MiB/s`,
      );
    }
    for (let i = 0; i < o.repeat + 1; i++) {
      for (const t of targets) {
        const cpu0 = cpuMsOf(t.pid);
        const t0 = performance.now();
        const r = await call(t, 'GET', `/v2/bench/blobs/blobs/${lastDigest.get(t)}`, undefined, {}, true);
        const cpu = cpuMsOf(t.pid) - cpu0;
        if (t.pid && (fig(t).blobGetCpuMs === 0 || cpu < fig(t).blobGetCpuMs)) fig(t).blobGetCpuMs = cpu;
        expect({ status: r.status, body: Buffer.alloc(0) }, 200, 'blob GET');
        if (r.bytes !== size)
          throw new Error(`${t.name}: blob GET returned ${r.bytes} bytes, expected ${size}`);
        fig(t).blobGetMiBs = Math.max(fig(t).blobGetMiBs, o.blobMiB / ((performance.now() - t0) / 1000));
      }
    }
    for (const t of targets)
      log(t, `blob GET ${fig(t).blobGetMiBs.toFixed(0)} MiB/s (server CPU ${fig(t).blobGetCpuMs} ms)`);
    const layers = new Map<Target, string>();
    for (const t of targets) layers.set(t, await pushSmallImage(t, 'bench/small'));
    const accept =
      'application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.index.v1+json';
    const rounds = 2;
    const rate = async (kind: 'manifest' | 'head') => {
      const totals = new Map<Target, { requests: number; seconds: number; p99: number; errors: number }>();
      for (let round = 0; round < rounds; round++) {
        for (const t of targets) {
          const spec =
            kind === 'manifest'
              ? {
                  method: 'GET' as const,
                  path: '/v2/bench/small/manifests/latest',
                  headers: { Accept: accept },
                }
              : { method: 'HEAD' as const, path: `/v2/bench/small/blobs/${layers.get(t)}` };
          if (round === 0) {
            await runLoad({
              host: t.host,
              port: t.port,
              ...spec,
              connections: o.connections,
              durationMs: 500,
            });
          }
          const r = await runLoad({
            host: t.host,
            port: t.port,
            ...spec,
            connections: o.connections,
            durationMs: (o.seconds * 1000) / rounds,
          });
          const acc = totals.get(t) ?? { requests: 0, seconds: 0, p99: 0, errors: 0 };
          acc.requests += r.requests;
          acc.seconds += r.seconds;
          acc.p99 = Math.max(acc.p99, r.p99ms);
          acc.errors += r.errors;
          totals.set(t, acc);
        }
      }
      for (const t of targets) {
        const acc = totals.get(t)!;
        const perSecond = acc.requests / acc.seconds;
        if (kind === 'manifest') {
          fig(t).manifestRps = perSecond;
          fig(t).manifestP99 = acc.p99;
        } else {
          fig(t).headRps = perSecond;
          fig(t).headP99 = acc.p99;
        }
        fig(t).errors += acc.errors;
        log(
          t,
          `${kind === 'manifest' ? 'manifest GET' : 'blob HEAD'} ${perSecond.toFixed(0)} req/s (p99 ${acc.p99.toFixed(1)} ms, errors ${acc.errors})`,
        );
      }
    };
    await rate('manifest');
    await rate('head');
    for (const t of targets) fig(t).rssLoad = Math.max(fig(t).rssLoad, rssOf(t.pid));
    return figures;
  } finally {
    clearInterval(sampler);
  }
}

function table(rows: Array<[string, Figures | undefined]>, o: Options): string {
  const fmt = (n: number | undefined, digits = 0) => (n === undefined || n === 0 ? '-' : n.toFixed(digits));
  const mib = (n: number | undefined) => (n ? (n / MiB).toFixed(1) : '-');
  const lines: Array<[string, (f: Figures) => string]> = [
    [`blob GET ${o.blobMiB} MiB (MiB/s)`, (f) => fmt(f.blobGetMiBs)],
    [`blob GET ${o.blobMiB} MiB, server CPU (ms)`, (f) => fmt(f.blobGetCpuMs)],
    [`monolithic upload ${o.blobMiB} MiB (MiB/s)`, (f) => fmt(f.monoMiBs)],
    [`chunked upload ${o.blobMiB} MiB, ${o.chunkMiB} MiB chunks (MiB/s)`, (f) => fmt(f.chunkedMiBs)],
    [`manifest GET, ${o.connections} conns (req/s)`, (f) => fmt(f.manifestRps)],
    ['manifest GET p99 (ms)', (f) => fmt(f.manifestP99, 1)],
    [`blob HEAD, ${o.connections} conns (req/s)`, (f) => fmt(f.headRps)],
    ['blob HEAD p99 (ms)', (f) => fmt(f.headP99, 1)],
    ['RSS idle (MiB)', (f) => mib(f.rssIdle)],
    ['RSS under load, max (MiB)', (f) => mib(f.rssLoad)],
  ];
  const header = ['', ...rows.map(([name]) => name)];
  const body = lines.map(([label, get]) => [label, ...rows.map(([, f]) => (f ? get(f) : 'n/a'))]);
  const ratio = rows.length === 2 && rows[0]?.[1] && rows[1]?.[1];
  if (ratio) {
    header.push('berth/ref');
    const [a, b] = [rows[0]![1]!, rows[1]![1]!];
    const r = (x: number, y: number) => (x && y ? `${(x / y).toFixed(2)}x` : '-');
    const ratios = [
      r(a.blobGetMiBs, b.blobGetMiBs),
      r(b.blobGetCpuMs, a.blobGetCpuMs),
      r(a.monoMiBs, b.monoMiBs),
      r(a.chunkedMiBs, b.chunkedMiBs),
      r(a.manifestRps, b.manifestRps),
      r(b.manifestP99, a.manifestP99),
      r(a.headRps, b.headRps),
      r(b.headP99, a.headP99),
      r(b.rssIdle, a.rssIdle),
      r(b.rssLoad, a.rssLoad),
    ];
    body.forEach((line, i) => {
      line.push(ratios[i] ?? '');
    });
  }
  const all = [header, ...body];
  const widths = header.map((_, c) => Math.max(...all.map((row) => (row[c] ?? '').length)));
  const render = (row: string[]) =>
    row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ');
  return [render(header), ...body.map(render)].join('\n');
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
  const rows: Array<[string, Figures | undefined]> = [];
  const started: Target[] = [];
  const stopAll = async () => {
    for (const t of started.splice(0)) await t.stop().catch(() => {});
  };
  process.once('SIGINT', () => void stopAll().then(() => process.exit(130)));
  const targets: Target[] = [];
  const start = async (name: string, begin: () => Promise<Target>, owned: boolean) => {
    try {
      const t = await begin();
      if (owned) started.push(t);
      targets.push(t);
    } catch (err) {
      process.stderr.write(`[${name}] failed to start: ${(err as Error).message}\n`);
      rows.push([name, undefined]);
    }
  };
  try {
    const berthUrl = o.berth;
    if (berthUrl) await start('berth', async () => external('berth', berthUrl), false);
    else await start('berth', () => startBerth(repoRoot, [], 'berth', o.nodeFlags), true);
    const refUrl = o.reference;
    if (refUrl) await start('reference', async () => external('reference', refUrl), false);
    else if (!o.noReference && existsSync(REFERENCE_BINARY))
      await start('reference', () => startReference(), true);
    if (targets.length > 0) {
      const figures = await measureAll(targets, o);
      for (const t of targets) rows.push([t.name, figures.get(t)]);
      rows.sort((a, b) => (a[0] === 'berth' ? -1 : b[0] === 'berth' ? 1 : 0));
    }
  } finally {
    await stopAll();
    agent.destroy();
  }
  if (!o.berth)
    process.stdout.write(
      `\nberth runs as: node ${(o.nodeFlags ?? BERTH_NODE_FLAGS).join(' ')} main.js registry\n`,
    );
  process.stdout.write(`\n${table(rows, o)}\n`);
  process.stdout.write(
    '\n(both registries run side by side and are measured alternately within each phase; throughput: best of the runs; rates: closed loop on keep-alive connections, two alternating halves each; RSS: VmRSS of the server process; berth/ref > 1 is better for berth on every row)\n',
  );
}

main().catch((err) => {
  process.stderr.write(`registry bench: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
