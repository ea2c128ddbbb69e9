/**
 * Push of an image with one big layer (default 256 MiB of random bytes: what gzip cannot shrink,
 * the worst case for the compression both engines do) to an empty loopback registry (Debian's
 * docker-registry), by berth and by Debian's dockerd in the same run, through the docker CLI.
 *
 *   node --import tsx bench/images/push.bench.ts [--mib 256] [--runs 3] [--content random|text|zero]
 *
 * Both engines import the same tarball (uncompressed: each must compress the layer for the
 * registry, as a layer made by import, commit or build), each run pushes to a fresh registry of
 * its own (berth first in odd runs, dockerd first in even ones), then pushes again (every layer
 * already there). berth runs from the build in dist/ (`npm run build` first).
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { pack } from 'tar-stream';
import { TestEngine } from '../../test/helpers/engine.js';
import { ReferenceDockerd } from '../../test/helpers/reference-dockerd.js';
import { type ReferenceRegistry, startReferenceRegistry } from '../../test/helpers/registry-reference.js';

const repoRoot = resolve(import.meta.dirname, '../..');
const { values } = parseArgs({
  options: {
    mib: { type: 'string', default: '256' },
    runs: { type: 'string', default: '3' },
    content: { type: 'string', default: 'random' },
  },
});
const MIB = Number(values.mib);
const RUNS = Math.max(1, Math.min(10, Number(values.runs)));

/** 1 MiB of the chosen content: random bytes, zeros, or text (words; gzip shrinks it to ~35%). */
function chunk(i: number): Buffer {
  if (values.content === 'zero') return Buffer.alloc(1 << 20);
  if (values.content === 'text') {
    const words = [
      'layer',
      'registry',
      'push',
      'manifest',
      'blob',
      'digest',
      'tar',
      'gzip',
      'engine',
      'berth',
    ];
    const parts: string[] = [];
    let n = 0;
    let x = i + 1;
    while (n < 1 << 20) {
      x = (x * 1103515245 + 12345) % 2147483648;
      const w = `${words[x % words.length]}${x % 97} `;
      parts.push(w);
      n += w.length;
    }
    return Buffer.from(parts.join('')).subarray(0, 1 << 20);
  }
  return randomBytes(1 << 20);
}

async function writeLayerTar(path: string): Promise<void> {
  const p = pack();
  const chunks: Buffer[] = [];
  p.on('data', (c: unknown) => chunks.push(c as Buffer));
  const done = new Promise<void>((r) => p.on('end', () => r()));
  const parts: Buffer[] = [];
  for (let i = 0; i < MIB; i++) parts.push(chunk(i));
  p.entry({ name: 'big.bin', mode: 0o644, mtime: new Date(0) }, Buffer.concat(parts));
  p.finalize();
  await done;
  await writeFile(path, Buffer.concat(chunks));
}

interface Pusher {
  name: string;
  docker(args: string[]): Promise<{ code: number; stdout: string; stderr: string }>;
}

async function timedPush(p: Pusher, ref: string): Promise<number> {
  const t = performance.now();
  const r = await p.docker(['push', ref]);
  const ms = performance.now() - t;
  if (r.code !== 0) throw new Error(`${p.name}: docker push ${ref} failed: ${r.stdout}${r.stderr}`);
  return ms;
}

async function main(): Promise<void> {
  if (!existsSync(join(repoRoot, 'dist/cli/main.js')))
    throw new Error('no build in dist/: run npm run build first');
  const work = await mkdtemp(join(tmpdir(), 'berth-push-bench-'));
  const tar = join(work, 'layer.tar');
  await writeLayerTar(tar);
  const berth = await TestEngine.start({ logLevel: 'warn', compiled: true, bridge: 'none' });
  const dockerd = await ReferenceDockerd.start();
  const registries: ReferenceRegistry[] = [];
  const results: Record<string, { push: number[]; repush: number[] }> = {
    berth: { push: [], repush: [] },
    dockerd: { push: [], repush: [] },
  };
  try {
    const pushers: Pusher[] = [
      { name: 'berth', docker: (a) => berth.docker(a, { timeoutMs: 600_000 }) },
      { name: 'dockerd', docker: (a) => dockerd.docker(a, { timeoutMs: 600_000 }) },
    ];
    for (const p of pushers) {
      const r = await p.docker(['import', tar, 'bench/big:1']);
      if (r.code !== 0) throw new Error(`${p.name}: import failed: ${r.stderr}`);
    }
    for (let run = 0; run < RUNS; run++) {
      const order = run % 2 === 0 ? pushers : [...pushers].reverse();
      for (const p of order) {
        const reg = await startReferenceRegistry(await mkdtemp(join(work, 'reg-')));
        registries.push(reg);
        const ref = `${reg.hostPort}/big:1`;
        const tag = await p.docker(['tag', 'bench/big:1', ref]);
        if (tag.code !== 0) throw new Error(tag.stderr);
        results[p.name]?.push.push(await timedPush(p, ref));
        results[p.name]?.repush.push(await timedPush(p, ref));
        await reg.stop();
        await rm(reg.root, { recursive: true, force: true });
      }
    }
  } finally {
    await berth.destroy();
    await dockerd.destroy();
    for (const r of registries) await r.stop().catch(() => undefined);
    await rm(work, { recursive: true, force: true });
  }
  const fmt = (xs: number[]) => xs.map((x) => (x / 1000).toFixed(2)).join(' / ');
  console.log(
    `push of one ${MIB} MiB layer (${values.content}) to an empty loopback docker-registry, ${RUNS} runs (s)`,
  );
  for (const [name, r] of Object.entries(results)) {
    console.log(`  ${name.padEnd(8)} push ${fmt(r.push)}   re-push ${fmt(r.repush)}`);
  }
  const b = results.berth?.push ?? [];
  const d = results.dockerd?.push ?? [];
  console.log(`  berth/dockerd per run: ${b.map((x, i) => (x / (d[i] ?? x)).toFixed(2)).join(' / ')}`);
}

await main();
