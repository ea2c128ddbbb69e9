/**
 * Build benchmark: a 10-step Dockerfile (FROM busybox, COPY of a 50 MiB context, RUN steps,
 * metadata steps) through `docker build` (the classic request), cold (`--no-cache`) and fully
 * cached, on berth and, given its socket, a reference dockerd, taking turns.
 *
 *   node --import tsx bench/build/build.bench.ts [--berth unix:///path] [--reference unix:///path]
 *        [--rounds 3] [--context-mib 50]
 *
 * Without --berth it starts its own berth engine from dist/, without --reference its own dockerd
 * (Debian's 20.10, as the other benchmarks). Bounded: rounds × 2 builds per engine, the engines
 * taking turns going first (round by round). Each round
 * also times the CLI's request against a server that only reads the context and answers an image
 * ID: the upload alone, the floor of any build with this context; and against one that also
 * takes the sha256 of every byte (the least a build whose COPY is checksummed does).
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ReferenceDockerd } from '../../test/helpers/reference-dockerd.js';
import { EngineClient } from '../engine/client.js';
import { median } from '../engine/stats.js';
import { ensureBusybox, startBerth } from '../engine/targets.js';

const run = promisify(execFile);

interface Options {
  berth?: string;
  reference?: string;
  rounds: number;
  contextMiB: number;
}

function parseOptions(argv: string[]): Options {
  const o: Options = { rounds: 3, contextMiB: 50 };
  for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1] ?? ''];
    if (k === '--berth') o.berth = v;
    else if (k === '--reference') o.reference = v;
    else if (k === '--rounds') o.rounds = Number(v);
    else if (k === '--context-mib') o.contextMiB = Number(v);
    else throw new Error(`unknown option ${k}`);
  }
  return o;
}

const DOCKERFILE = [
  'FROM busybox',
  'ENV APP=/app',
  'WORKDIR /app',
  'COPY big.bin /app/big.bin',
  'RUN md5sum /app/big.bin > /app/sum',
  'RUN echo built > /app/marker',
  'LABEL bench=build',
  'EXPOSE 8080',
  'RUN ls -l /app > /app/listing',
  'CMD ["cat", "/app/sum"]',
  '',
].join('\n');

/** One `docker build` (the CLI's classic request), in milliseconds. */
async function build(host: string, ctx: string, noCache: boolean): Promise<number> {
  const started = performance.now();
  await run(
    'docker',
    ['-H', host, 'build', '-q', ...(noCache ? ['--no-cache'] : []), '-t', 'bench-build', ctx],
    {
      env: { ...process.env, DOCKER_BUILDKIT: '0', DOCKER_CLI_HINTS: 'false' },
      maxBuffer: 16 * 1024 * 1024,
    },
  );
  return performance.now() - started;
}

/**
 * A server on a socket in `dir` that answers the CLI's ping and build requests by reading the
 * whole body and naming an image: what the CLI's upload of the context costs by itself.
 */
async function drainServer(dir: string, hash = false): Promise<{ host: string; server: Server }> {
  const id = `sha256:${'0'.repeat(64)}`;
  const server = createServer((req, res) => {
    if (req.url?.endsWith('/_ping')) {
      res.writeHead(200, { 'API-Version': '1.41', 'Builder-Version': '1', 'Content-Type': 'text/plain' });
      res.end(req.method === 'HEAD' ? undefined : 'OK');
      return;
    }
    const digest = hash ? createHash('sha256') : undefined;
    if (digest) req.on('data', (c: Buffer) => digest.update(c));
    else req.resume();
    req.on('end', () => {
      digest?.digest();
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(`${JSON.stringify({ aux: { ID: id } })}\n${JSON.stringify({ stream: `${id}\n` })}\n`);
    });
  });
  const path = join(dir, hash ? 'hash.sock' : 'drain.sock');
  await new Promise<void>((resolve) => server.listen(path, resolve));
  return { host: `unix://${path}`, server };
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  const ctx = await mkdtemp(join(tmpdir(), 'berth-bench-build-'));
  let stopBerth: (() => Promise<void>) | undefined;
  let dockerd: ReferenceDockerd | undefined;
  const sockDir = await mkdtemp(join(tmpdir(), 'berth-bench-drain-'));
  const drain = await drainServer(sockDir);
  const hashed = await drainServer(sockDir, true);
  try {
    await writeFile(join(ctx, 'Dockerfile'), DOCKERFILE);
    await writeFile(join(ctx, 'big.bin'), randomBytes(o.contextMiB * 1024 * 1024));
    let berth = o.berth;
    if (!berth) {
      const b = await startBerth();
      berth = b.host;
      stopBerth = b.stop;
    }
    if (!o.reference) {
      dockerd = await ReferenceDockerd.start();
      o.reference = dockerd.host;
    }
    const engines: Array<{ name: string; host: string }> = [
      { name: 'berth', host: berth },
      { name: 'dockerd', host: o.reference },
    ];
    for (const e of engines) {
      const client = new EngineClient(e.host.replace(/^unix:\/\//, ''));
      await ensureBusybox(client);
      client.close();
      // warm-up: one build each (page cache, first-use costs), not measured
      await build(e.host, ctx, true);
    }
    const loadBefore = loadavg()[0] as number;
    const cold = new Map<string, number[]>(engines.map((e) => [e.name, []]));
    const cached = new Map<string, number[]>(engines.map((e) => [e.name, []]));
    const upload: number[] = [];
    const uploadHashed: number[] = [];
    for (let round = 0; round < o.rounds; round++) {
      // the engines take turns going first: each one's cached build follows the other's cold
      // build (and its writeback) as often
      const order = round % 2 === 0 ? engines : [...engines].reverse();
      for (const e of order) cold.get(e.name)?.push(await build(e.host, ctx, true));
      for (const e of order) cached.get(e.name)?.push(await build(e.host, ctx, false));
      upload.push(await build(drain.host, ctx, false));
      uploadHashed.push(await build(hashed.host, ctx, false));
    }
    const row = (label: string, m: Map<string, number[]>) =>
      `${label.padEnd(34)}${engines
        .map((e) =>
          median(m.get(e.name) ?? [])
            .toFixed(0)
            .padStart(10),
        )
        .join('')}`;
    console.log(`${'median of rounds (ms)'.padEnd(34)}${engines.map((e) => e.name.padStart(10)).join('')}`);
    console.log(row(`cold (--no-cache), ${o.contextMiB} MiB context`, cold));
    console.log(row('fully cached', cached));
    for (const e of engines) {
      const each = (m: Map<string, number[]>) => (m.get(e.name) ?? []).map((v) => v.toFixed(0)).join(' ');
      console.log(`  ${e.name} rounds: cold ${each(cold)}; cached ${each(cached)}`);
    }
    console.log(`${'the CLI upload alone (drained)'.padEnd(34)}${median(upload).toFixed(0).padStart(10)}`);
    console.log(
      `${'the upload, every byte hashed'.padEnd(34)}${median(uploadHashed).toFixed(0).padStart(10)}`,
    );
    const ratio = (m: Map<string, number[]>) =>
      (median(m.get('berth') ?? []) / median(m.get('dockerd') ?? [])).toFixed(2);
    console.log(`berth / dockerd: cold ${ratio(cold)} (aim ≤ 0.7), cached ${ratio(cached)} (aim ≤ 0.5)`);
    console.log(`load (1 min) ${loadBefore.toFixed(1)} → ${(loadavg()[0] as number).toFixed(1)}`);
  } finally {
    await new Promise<void>((resolve) => drain.server.close(() => resolve()));
    await new Promise<void>((resolve) => hashed.server.close(() => resolve()));
    await rm(sockDir, { recursive: true, force: true });
    await stopBerth?.();
    await dockerd?.stop();
    await rm(ctx, { recursive: true, force: true });
  }
}

await main();
