/**
 * Blob GET by size: berth's registry beside the reference registry (distribution), blob by blob
 * size and connection count, with the server's and the client's CPU per request.
 *
 *   node --import tsx bench/registry/blob-get.bench.ts [--sizes 1k,1m,64m,256m] [--connections 1,8]
 *        [--seconds 2] [--rounds 5] [--client raw|node|curl] [--node-flags '--max-semi-space-size=2']
 *        [--compare DIR]...
 *
 * Starts both registries (bench/registry/targets.ts: loopback, temporary roots, stopped by PID),
 * pushes one blob of random bytes per size to each, then for every size and connection count
 * measures `--rounds` rounds, the registries taking turns within each round so that both meet
 * the same background load: a closed loop of GETs on keep-alive connections for `--seconds`
 * (raw sockets, bench/registry/load.ts), `--client node` (Node's HTTP client, as registry.bench.ts),
 * or `--client curl` (one curl per connection, each
 * fetching the blob over and over on one connection). Prints the median and best MiB/s,
 * requests/s and the CPU per request of the server (/proc/<pid>/stat) and of the client (this
 * process, or the curls). `--compare DIR` adds another checkout of berth (its built dist/, e.g.
 * the commit before a change) beside this one, in the same turns. Every loop is bounded.
 */
import { spawn } from 'node:child_process';
import { createHash, randomFillSync } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { basename, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runLoad } from './load.js';
import { cpuMsOf, REFERENCE_BINARY, startBerth, startReference, type Target } from './targets.js';

const UNITS: Record<string, number> = { '': 1, k: 1024, m: 1024 * 1024, g: 1024 * 1024 * 1024 };

function parseSize(s: string): number {
  const m = /^(\d+)([kmg]?)$/i.exec(s.trim());
  if (!m) throw new Error(`bad size ${s} (e.g. 1k, 1m, 64m)`);
  return Number(m[1]) * (UNITS[(m[2] ?? '').toLowerCase()] ?? 1);
}

interface Options {
  sizes: number[];
  connections: number[];
  seconds: number;
  rounds: number;
  client: 'raw' | 'node' | 'curl';
  nodeFlags?: string[];
  /** Other checkouts of berth (their dist/) measured beside this one. */
  compare: string[];
}

function parseOptions(argv: string[]): Options {
  const o: Options = {
    sizes: ['1k', '1m', '64m', '256m'].map(parseSize),
    connections: [1, 8],
    seconds: 2,
    rounds: 5,
    client: 'raw',
    compare: [],
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[++i];
    if (v === undefined) throw new Error(`${a} needs a value`);
    if (a === '--sizes') o.sizes = v.split(',').map(parseSize);
    else if (a === '--connections') o.connections = v.split(',').map((n) => Math.min(256, Number(n)));
    else if (a === '--seconds') o.seconds = Math.min(30, Number(v));
    else if (a === '--rounds') o.rounds = Math.min(20, Number(v));
    else if (a === '--client' && (v === 'raw' || v === 'node' || v === 'curl')) o.client = v;
    else if (a === '--compare') o.compare.push(v);
    else if (a === '--node-flags') o.nodeFlags = v.split(/\s+/).filter(Boolean);
    else throw new Error(`unknown option ${a} ${v}`);
  }
  if (o.sizes.some((s) => !(s > 0 && s <= 2 ** 31))) throw new Error('sizes: 1 byte to 2 GiB');
  if (o.connections.some((c) => !(c >= 1)) || !(o.seconds > 0) || !(o.rounds >= 1))
    throw new Error('connections, seconds and rounds must be positive');
  return o;
}

async function pushBlob(t: Target, data: Buffer, digest: string): Promise<void> {
  const post = await fetch(`${t.url}/v2/bench/sizes/blobs/uploads/`, { method: 'POST' });
  await post.arrayBuffer();
  const location = new URL(post.headers.get('location') ?? '', t.url);
  location.searchParams.set('digest', digest);
  const put = await fetch(location, {
    method: 'PUT',
    body: data,
    headers: { 'Content-Type': 'application/octet-stream' },
  });
  await put.arrayBuffer();
  if (put.status !== 201) throw new Error(`${t.name}: blob push answered ${put.status}`);
}

interface Sample {
  mibs: number;
  rps: number;
  serverMs: number;
  clientMs: number;
  errors: number;
}

/** CPU (user + system) of this process so far, ms. */
const ownCpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

/**
 * How long one sample runs: `requests` GETs in all when given (large blobs: a time window would
 * cut a transfer or leave a share idle at its end), else `ms` of GETs.
 */
interface Budget {
  ms: number;
  requests?: number;
}

/** Requests per connection for a budget of `requests` in all. */
const share = (budget: Budget, connections: number, i: number) =>
  budget.requests === undefined
    ? Number.POSITIVE_INFINITY
    : Math.floor(budget.requests / connections) + (i < budget.requests % connections ? 1 : 0);

const sampleOf = (
  size: number,
  requests: number,
  seconds: number,
  serverMs: number,
  clientMs: number,
  errors: number,
): Sample => ({
  mibs: (requests * size) / (1024 * 1024) / seconds,
  rps: requests / seconds,
  serverMs: serverMs / Math.max(1, requests),
  clientMs: clientMs / Math.max(1, requests),
  errors,
});

async function rawSample(t: Target, path: string, size: number, connections: number, budget: Budget) {
  const s0 = cpuMsOf(t.pid);
  const c0 = ownCpuMs();
  const r = await runLoad({
    host: t.host,
    port: t.port,
    method: 'GET',
    path,
    connections,
    durationMs: budget.ms,
    maxRequests: budget.requests,
  });
  return sampleOf(size, r.requests, r.seconds, cpuMsOf(t.pid) - s0, ownCpuMs() - c0, r.errors);
}

/** Node's HTTP client (an Agent with keep-alive, the body counted in 'data' events), as registry.bench.ts. */
async function nodeSample(t: Target, path: string, size: number, connections: number, budget: Budget) {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const s0 = cpuMsOf(t.pid);
  const c0 = ownCpuMs();
  const t0 = performance.now();
  const deadline = t0 + budget.ms;
  let requests = 0;
  let errors = 0;
  const one = (): Promise<void> =>
    new Promise((done) => {
      const req = request({ host: t.host, port: t.port, path, agent }, (res) => {
        let bytes = 0;
        res.on('data', (d: Buffer) => {
          bytes += d.length;
        });
        res.on('end', () => {
          if (res.statusCode === 200 && bytes === size) requests++;
          else errors++;
          done();
        });
      });
      req.on('error', () => {
        errors++;
        done();
      });
      req.end();
    });
  await Promise.all(
    Array.from({ length: connections }, async (_, i) => {
      for (let n = share(budget, connections, i); n > 0; n--) {
        if (performance.now() >= deadline || errors >= 1000) break;
        await one();
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  agent.destroy();
  return sampleOf(size, requests, seconds, cpuMsOf(t.pid) - s0, ownCpuMs() - c0, errors);
}

/** CPU (user + system) of this process's children that were waited for, ms (/proc/self/stat). */
function childrenCpuMs(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[13]) + Number(fields[14])) * 10;
}

/**
 * One curl per connection, each fetching the blob again and again (the URL repeated) on one
 * keep-alive connection, its share of the budget's requests or until stopped at the deadline;
 * each transfer's status and size go to curl's stderr as it ends (unbuffered: an interrupted
 * curl loses none).
 */
async function curlSample(t: Target, path: string, size: number, connections: number, budget: Budget) {
  // Without a count: enough repetitions for the time at a generous 4 GiB/s, stopped at the deadline.
  const guess = Math.max(1, Math.min(5000, Math.ceil(((4 * 1024 ** 3) / size) * (budget.ms / 1000))));
  const url = `${t.url}${path}`;
  const s0 = cpuMsOf(t.pid);
  const c0 = childrenCpuMs();
  const t0 = performance.now();
  const runs = await Promise.all(
    Array.from(
      { length: connections },
      (_, i) =>
        new Promise<{ whole: number; errors: number }>((done) => {
          const count = Math.min(guess, share(budget, connections, i));
          if (count === 0) return done({ whole: 0, errors: 0 });
          const args = ['-s', '-w', '%{stderr}%{http_code} %{size_download}\\n'];
          for (let n = 0; n < count; n++) args.push('-o', '/dev/null', url);
          const child = spawn('curl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
          let out = '';
          child.stderr.on('data', (d: Buffer) => {
            out += d.toString();
          });
          const timer = setTimeout(() => child.kill('SIGINT'), budget.ms);
          child.on('close', (code) => {
            clearTimeout(timer);
            const lines = out.split('\n').filter(Boolean);
            const whole = lines.filter((l) => l === `200 ${size}`).length;
            // a transfer cut at the deadline is neither counted nor an error
            const cut = code === 0 ? 0 : 1;
            done({ whole, errors: Math.max(0, lines.length - whole - cut) });
          });
        }),
    ),
  );
  const seconds = (performance.now() - t0) / 1000;
  const requests = runs.reduce((n, r) => n + r.whole, 0);
  const errors = runs.reduce((n, r) => n + r.errors, 0);
  return sampleOf(size, requests, seconds, cpuMsOf(t.pid) - s0, childrenCpuMs() - c0, errors);
}

/** Blobs from 16 MiB: a count of GETs worth `seconds` at 512 MiB/s (at least one per connection). */
const LARGE = 16 * 1024 * 1024;
const budget = (size: number, connections: number, seconds: number): Budget =>
  size < LARGE
    ? { ms: seconds * 1000 }
    : { ms: 120_000, requests: Math.max(connections, Math.round((seconds * 512 * 1024 * 1024) / size)) };
const warmUp = (size: number, connections: number): Budget =>
  size < LARGE ? { ms: 300 } : { ms: 120_000, requests: connections };

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] ?? 0) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
};

function human(size: number): string {
  for (const [unit, n] of [
    ['GiB', 1024 ** 3],
    ['MiB', 1024 ** 2],
    ['KiB', 1024],
  ] as const)
    if (size >= n && size % n === 0) return `${size / n} ${unit}`;
  return `${size} B`;
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
  const targets: Target[] = [];
  const stopAll = async () => {
    for (const t of targets.splice(0)) await t.stop().catch(() => {});
  };
  process.once('SIGINT', () => void stopAll().then(() => process.exit(130)));
  const rows: string[][] = [];
  const names: string[] = [];
  let errors = 0;
  try {
    targets.push(await startBerth(repoRoot, [], 'berth', o.nodeFlags));
    for (const dir of o.compare)
      targets.push(await startBerth(resolve(dir), [], `berth@${basename(resolve(dir))}`, o.nodeFlags));
    if (existsSync(REFERENCE_BINARY)) targets.push(await startReference());
    names.push(...targets.map((t) => t.name));
    const digests = new Map<number, string>();
    for (const size of o.sizes) {
      const data = randomFillSync(Buffer.allocUnsafe(size));
      const digest = `sha256:${createHash('sha256').update(data).digest('hex')}`;
      for (const t of targets) await pushBlob(t, data, digest);
      digests.set(size, digest);
    }
    const sample = o.client === 'curl' ? curlSample : o.client === 'node' ? nodeSample : rawSample;
    for (const size of o.sizes) {
      const path = `/v2/bench/sizes/blobs/${digests.get(size)}`;
      for (const connections of o.connections) {
        const samples = new Map<Target, Sample[]>(targets.map((t) => [t, []]));
        // warm-up: page cache, code, connections' first requests
        for (const t of targets) await sample(t, path, size, connections, warmUp(size, connections));
        for (let round = 0; round < o.rounds; round++) {
          // a different one first in each round, so none always follows the same other
          const order = targets.map((_, i) => targets[(i + round) % targets.length] as Target);
          for (const t of order)
            samples
              .get(t)
              ?.push(await sample(t, path, size, connections, budget(size, connections, o.seconds)));
        }
        const figs = targets.map((t) => {
          const s = samples.get(t) ?? [];
          errors += s.reduce((n, x) => n + x.errors, 0);
          return {
            mibs: median(s.map((x) => x.mibs)),
            best: Math.max(...s.map((x) => x.mibs)),
            serverMs: median(s.map((x) => x.serverMs)),
            clientMs: median(s.map((x) => x.clientMs)),
          };
        });
        const cpu = (ms: number) => (Number.isNaN(ms) ? '-' : ms < 1 ? ms.toFixed(3) : ms.toFixed(1));
        const row = [human(size), String(connections)];
        for (const f of figs)
          row.push(`${f.mibs.toFixed(0)} (${f.best.toFixed(0)})`, cpu(f.serverMs), cpu(f.clientMs));
        const ref = targets.at(-1)?.name === 'reference' ? figs.at(-1) : undefined;
        if (ref) for (const f of figs.slice(0, -1)) row.push(`${(f.mibs / ref.mibs).toFixed(2)}x`);
        rows.push(row);
        process.stderr.write(`${row.join('  ')}\n`);
      }
    }
  } finally {
    await stopAll();
  }
  const header = ['blob', 'conns'];
  for (const n of names) header.push(`${n} MiB/s median (best)`, 'server CPU ms/GET', 'client CPU ms/GET');
  if (names.at(-1) === 'reference') for (const n of names.slice(0, -1)) header.push(`${n}/reference`);
  process.stdout.write(`\n| ${header.join(' | ')} |\n|${header.map(() => '---').join('|')}|\n`);
  for (const r of rows) process.stdout.write(`| ${r.join(' | ')} |\n`);
  process.stdout.write(
    `\n(client ${o.client}; ${o.rounds} rounds per cell, the registries in turns; CPU from /proc/<pid>/stat, 10 ms ticks; ${errors} failed GETs)\n`,
  );
}

main().catch((err) => {
  process.stderr.write(`blob-get bench: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
