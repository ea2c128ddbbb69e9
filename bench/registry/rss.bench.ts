/**
 * Registry memory: VmRSS of berth's registry, of the reference registry (distribution) and of an
 * empty Node HTTP server (the floor Node sets), idle after start and idle again after they
 * served the same requests, split into anonymous memory and file pages.
 *
 *   node --import tsx bench/registry/rss.bench.ts [--requests 3000] [--repeat 3]
 *        [--node-flags '--max-semi-space-size=2']
 *
 * Each repetition starts the three processes afresh (loopback, temporary roots, stopped by
 * PID), waits 2 s, reads /proc/<pid>/status, sends `--requests` GET /v2/ on 4 keep-alive
 * connections to each, waits 2 s and reads it again. Figures: the median of the repetitions.
 */
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runLoad } from './load.js';
import {
  BERTH_NODE_FLAGS,
  REFERENCE_BINARY,
  rssPartsOf,
  startBareNode,
  startBerth,
  startReference,
  type Target,
} from './targets.js';

function option(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i < 0 ? undefined : process.argv[i + 1];
}

function count(name: string, fallback: number, max: number): number {
  const v = option(name);
  if (v === undefined) return fallback;
  const n = Math.floor(Number(v));
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} needs a positive number`);
  return Math.min(max, n);
}

type Parts = ReturnType<typeof rssPartsOf>;
const MiB = 1024 * 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const requests = count('--requests', 3000, 1_000_000);
  const repeat = count('--repeat', 3, 10);
  const flagsOption = option('--node-flags');
  const nodeFlags = flagsOption === undefined ? BERTH_NODE_FLAGS : flagsOption.split(/\s+/).filter(Boolean);
  const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
  const starters: Array<[string, () => Promise<Target>]> = [
    ['node listener', () => startBareNode(nodeFlags)],
    ['berth', () => startBerth(repoRoot, [], 'berth', nodeFlags)],
  ];
  if (existsSync(REFERENCE_BINARY)) starters.push(['reference', () => startReference()]);
  const samples = new Map<string, { idle: Parts[]; used: Parts[] }>();
  for (let i = 0; i < repeat; i++) {
    const targets: Target[] = [];
    try {
      for (const [, start] of starters) targets.push(await start());
      await sleep(2000);
      const idle = targets.map((t) => rssPartsOf(t.pid));
      for (const t of targets) {
        const r = await runLoad({
          host: t.host,
          port: t.port,
          method: 'GET',
          path: '/v2/',
          connections: 4,
          durationMs: 60_000,
          maxRequests: requests,
        });
        if (r.errors > 0) throw new Error(`${t.name}: ${r.errors} failed requests`);
      }
      await sleep(2000);
      targets.forEach((t, k) => {
        const s = samples.get(t.name) ?? { idle: [], used: [] };
        s.idle.push(idle[k]!);
        s.used.push(rssPartsOf(t.pid));
        samples.set(t.name, s);
      });
    } finally {
      for (const t of targets.reverse()) await t.stop().catch(() => {});
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
  const fmt = (ps: Parts[]) =>
    `${(median(ps.map((p) => p.rss)) / MiB).toFixed(1)} (anon ${(median(ps.map((p) => p.anon)) / MiB).toFixed(1)}, file ${(median(ps.map((p) => p.file)) / MiB).toFixed(1)})`;
  const lines = [...samples].map(
    ([name, s]) => `${name.padEnd(14)} idle ${fmt(s.idle)}   after ${requests} requests ${fmt(s.used)}`,
  );
  process.stdout.write(
    `\nVmRSS in MiB, median of ${repeat} (node flags for berth and the listener: ${nodeFlags.join(' ') || 'none'}):\n${lines.join('\n')}\n`,
  );
}

main().catch((err) => {
  process.stderr.write(`rss bench: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
