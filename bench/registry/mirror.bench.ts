/**
 * Pull-through cache benchmark: an image pulled through berth's proxy and through the reference
 * registry's proxy mode (distribution), both caching the same upstream (a berth registry).
 *
 *   node --import tsx bench/registry/mirror.bench.ts [--blob-mib 256] [--clients 4] [--repeat 2]
 *
 * For each proxy: a cold pull (manifest by tag, then the layer, by `--clients` clients at once:
 * what the upstream is asked once and streamed to all) and a warm pull of the same (served from
 * the cache), timed, with the proxy's CPU time; each run uses a fresh image so every cold pull
 * is cold, and the proxies take turns within each repetition. Processes are
 * started on loopback with temporary roots and stopped by PID. Every loop is bounded.
 */
import { createHash, randomFillSync } from 'node:crypto';
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { OCI_MANIFEST, pushImage } from '../../test/helpers/registry.js';
import { cpuMsOf, REFERENCE_BINARY, startBerth, startReference, type Target } from './targets.js';

const MiB = 1024 * 1024;

function option(name: string, fallback: number, max: number): number {
  const i = process.argv.indexOf(name);
  if (i < 0) return fallback;
  const n = Number(process.argv[i + 1]);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} needs a positive number`);
  return Math.min(max, n);
}

/** A fresh image in the upstream (`latest`): config and one layer of `size` random bytes. */
async function pushRandomImage(base: string, name: string, size: number): Promise<{ layer: string }> {
  return pushImage(base, name, 'latest', { layer: randomFillSync(Buffer.allocUnsafe(size)) });
}

/** Pull manifest and layer through a proxy by `clients` clients at once; seconds. */
async function pull(proxy: Target, name: string, layer: string, clients: number): Promise<number> {
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      const m = await fetch(`${proxy.url}/v2/${name}/manifests/latest`, {
        headers: { Accept: OCI_MANIFEST },
      });
      await m.arrayBuffer();
      if (m.status !== 200) throw new Error(`${proxy.name}: manifest ${m.status}`);
      const b = await fetch(`${proxy.url}/v2/${name}/blobs/${layer}`);
      const hash = createHash('sha256');
      for await (const chunk of b.body as AsyncIterable<Uint8Array>) hash.update(chunk);
      if (b.status !== 200 || `sha256:${hash.digest('hex')}` !== layer)
        throw new Error(`${proxy.name}: layer ${b.status}, digest mismatch`);
    }),
  );
  return Number(process.hrtime.bigint() - started) / 1e9;
}

async function main(): Promise<void> {
  const blobMiB = option('--blob-mib', 256, 2048);
  const clients = Math.floor(option('--clients', 4, 64));
  const repeat = Math.floor(option('--repeat', 2, 10));
  const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
  const started: Target[] = [];
  try {
    const upstream = await startBerth(repoRoot, [], 'upstream');
    started.push(upstream);
    const proxyConfig = ['proxy:', `  remoteurl: ${upstream.url}`];
    const proxies: Target[] = [await startBerth(repoRoot, proxyConfig, 'berth proxy')];
    started.push(...proxies);
    if (existsSync(REFERENCE_BINARY)) {
      const ref = await startReference(REFERENCE_BINARY, proxyConfig, 'reference proxy');
      started.push(ref);
      proxies.push(ref);
    }
    // Proxies take turns within each repetition, so that both meet the same background load.
    const best = new Map<Target, { cold: number; warm: number; coldCpu: number; warmCpu: number }>();
    for (const proxy of proxies)
      best.set(proxy, { cold: Infinity, warm: Infinity, coldCpu: Infinity, warmCpu: Infinity });
    for (let i = 0; i < repeat; i++) {
      for (const proxy of proxies) {
        const b = best.get(proxy)!;
        const name = `bench/${proxy.name.replace(/\W/g, '')}${i}`;
        const { layer } = await pushRandomImage(upstream.url, name, blobMiB * MiB);
        let cpu = cpuMsOf(proxy.pid);
        b.cold = Math.min(b.cold, await pull(proxy, name, layer, clients));
        b.coldCpu = Math.min(b.coldCpu, cpuMsOf(proxy.pid) - cpu);
        cpu = cpuMsOf(proxy.pid);
        b.warm = Math.min(b.warm, await pull(proxy, name, layer, clients));
        b.warmCpu = Math.min(b.warmCpu, cpuMsOf(proxy.pid) - cpu);
      }
    }
    const rate = (s: number) => ((blobMiB * clients) / s).toFixed(0);
    const rows = proxies.map((proxy) => {
      const b = best.get(proxy)!;
      return `${proxy.name.padEnd(16)} cold ${b.cold.toFixed(2)} s (${rate(b.cold)} MiB/s to clients, proxy CPU ${b.coldCpu} ms)  warm ${b.warm.toFixed(2)} s (${rate(b.warm)} MiB/s, proxy CPU ${b.warmCpu} ms)`;
    });
    process.stdout.write(
      `\npull of one ${blobMiB} MiB layer by ${clients} clients at once, best of ${repeat}:\n${rows.join('\n')}\n`,
    );
  } finally {
    for (const t of started.reverse()) await t.stop().catch(() => {});
  }
}

main().catch((err) => {
  process.stderr.write(`mirror bench: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
