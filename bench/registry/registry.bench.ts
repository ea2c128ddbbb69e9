/**
 * Registry benchmark: berth's registry beside the reference registry (distribution).
 *
 *   node --import tsx bench/registry/registry.bench.ts [--reference http://127.0.0.1:PORT]
 *        [--no-reference] [--berth http://127.0.0.1:PORT] [--blob-mib 256] [--chunk-mib 8]
 *        [--seconds 5] [--connections 32] [--repeat 3]
 *
 * Starts berth's registry as a child process on loopback with a temporary root (unless --berth
 * names a running one) and, when /usr/bin/docker-registry exists (or --reference is given), a
 * reference registry likewise; stops what it started by PID. Measures blob GET, monolithic and
 * chunked upload throughput, manifest GET and blob HEAD rates under concurrent keep-alive
 * connections, and the server's RSS idle and under load. Every loop is bounded.
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomFillSync } from 'node:crypto';
import { existsSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runLoad } from './load.js';
import { external, REFERENCE_BINARY, rssOf, startBerth, startReference, type Target } from './targets.js';

interface Options {
  berth?: string;
  reference?: string;
  noReference: boolean;
  blobMiB: number;
  chunkMiB: number;
  seconds: number;
  connections: number;
  repeat: number;
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

async function measure(t: Target, o: Options): Promise<Figures> {
  const log = (s: string) => process.stderr.write(`[${t.name}] ${s}\n`);
  const size = o.blobMiB * MiB;
  await new Promise((r) => setTimeout(r, 1000));
  const rssIdle = rssOf(t.pid);
  let rssLoad = rssIdle;
  const sampler = setInterval(() => {
    rssLoad = Math.max(rssLoad, rssOf(t.pid));
  }, 100);
  try {
    const data = Buffer.allocUnsafe(size);
    randomFillSync(data);
    let monoBest = 0;
    let chunkBest = 0;
    let lastDigest = '';
    for (let i = 0; i < o.repeat; i++) {
      data.writeUInt32BE(i * 2 + 1, 0);
      const d1 = sha(data);
      monoBest = Math.max(monoBest, o.blobMiB / (await monolithic(t, 'bench/blobs', data, d1)));
      lastDigest = d1;
      data.writeUInt32BE(i * 2 + 2, 0);
      const d2 = sha(data);
      chunkBest = Math.max(
        chunkBest,
        o.blobMiB / (await chunked(t, 'bench/blobs', data, d2, o.chunkMiB * MiB)),
      );
    }
    log(`upload: monolithic ${monoBest.toFixed(0)} MiB/s, chunked ${chunkBest.toFixed(0)} MiB/s`);
    let getBest = 0;
    for (let i = 0; i < o.repeat + 1; i++) {
      const t0 = performance.now();
      const r = await call(t, 'GET', `/v2/bench/blobs/blobs/${lastDigest}`, undefined, {}, true);
      expect({ status: r.status, body: Buffer.alloc(0) }, 200, 'blob GET');
      if (r.bytes !== size) throw new Error(`blob GET returned ${r.bytes} bytes, expected ${size}`);
      getBest = Math.max(getBest, o.blobMiB / ((performance.now() - t0) / 1000));
    }
    log(`blob GET ${getBest.toFixed(0)} MiB/s`);
    const layer = await pushSmallImage(t, 'bench/small');
    const accept =
      'application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.index.v1+json';
    // Warm-up, then the measured runs.
    await runLoad({
      host: t.host,
      port: t.port,
      method: 'GET',
      path: '/v2/bench/small/manifests/latest',
      headers: { Accept: accept },
      connections: o.connections,
      durationMs: 500,
    });
    const m = await runLoad({
      host: t.host,
      port: t.port,
      method: 'GET',
      path: '/v2/bench/small/manifests/latest',
      headers: { Accept: accept },
      connections: o.connections,
      durationMs: o.seconds * 1000,
    });
    log(`manifest GET ${m.perSecond.toFixed(0)} req/s (p99 ${m.p99ms.toFixed(1)} ms, errors ${m.errors})`);
    const h = await runLoad({
      host: t.host,
      port: t.port,
      method: 'HEAD',
      path: `/v2/bench/small/blobs/${layer}`,
      connections: o.connections,
      durationMs: o.seconds * 1000,
    });
    log(`blob HEAD ${h.perSecond.toFixed(0)} req/s (p99 ${h.p99ms.toFixed(1)} ms, errors ${h.errors})`);
    return {
      blobGetMiBs: getBest,
      monoMiBs: monoBest,
      chunkedMiBs: chunkBest,
      manifestRps: m.perSecond,
      headRps: h.perSecond,
      manifestP99: m.p99ms,
      headP99: h.p99ms,
      rssIdle,
      rssLoad: Math.max(rssLoad, rssOf(t.pid)),
      errors: m.errors + h.errors,
    };
  } finally {
    clearInterval(sampler);
  }
}

function table(rows: Array<[string, Figures | undefined]>, o: Options): string {
  const fmt = (n: number | undefined, digits = 0) => (n === undefined || n === 0 ? '-' : n.toFixed(digits));
  const mib = (n: number | undefined) => (n ? (n / MiB).toFixed(1) : '-');
  const lines: Array<[string, (f: Figures) => string]> = [
    [`blob GET ${o.blobMiB} MiB (MiB/s)`, (f) => fmt(f.blobGetMiBs)],
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
  const attempt = async (name: string, start: () => Promise<Target>, owned: boolean) => {
    try {
      const t = await start();
      if (owned) started.push(t);
      rows.push([name, await measure(t, o)]);
    } catch (err) {
      process.stderr.write(`[${name}] failed: ${(err as Error).message}\n`);
      rows.push([name, undefined]);
    } finally {
      await stopAll();
    }
  };
  try {
    const berthUrl = o.berth;
    if (berthUrl) await attempt('berth', async () => external('berth', berthUrl), false);
    else await attempt('berth', () => startBerth(repoRoot), true);
    const refUrl = o.reference;
    if (refUrl) await attempt('reference', async () => external('reference', refUrl), false);
    else if (!o.noReference && existsSync(REFERENCE_BINARY))
      await attempt('reference', () => startReference(), true);
  } finally {
    await stopAll();
    agent.destroy();
  }
  process.stdout.write(`\n${table(rows, o)}\n`);
  process.stdout.write(
    '\n(throughput: best of the runs; rates: closed loop on keep-alive connections; RSS: VmRSS of the server process; berth/ref > 1 is better for berth on every row)\n',
  );
}

main().catch((err) => {
  process.stderr.write(`registry bench: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
