/**
 * Engine benchmark over the Docker API, for berth and, given its socket, a reference dockerd.
 *
 *   node --import tsx bench/engine/engine.bench.ts [--berth unix:///path] [--reference unix:///path]
 *        [--iterations 30] [--concurrent-total 40] [--list 200] [--logs-mib 64]
 *
 * Without --berth it starts its own berth engine on a temp socket and data root. Every loop is
 * bounded in count; the whole run stops by itself.
 */
import { EngineClient } from './client.js';
import { median, percentile, timed } from './stats.js';
import { ensureBusybox, startBerth } from './targets.js';

interface Options {
  berth?: string;
  reference?: string;
  iterations: number;
  concurrentTotal: number;
  list: number;
  logsMiB: number;
}

function parseOptions(argv: string[]): Options {
  const o: Options = { iterations: 30, concurrentTotal: 40, list: 200, logsMiB: 64 };
  for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1] ?? ''];
    if (k === '--berth') o.berth = v;
    else if (k === '--reference') o.reference = v;
    else if (k === '--iterations') o.iterations = Number(v);
    else if (k === '--concurrent-total') o.concurrentTotal = Number(v);
    else if (k === '--list') o.list = Number(v);
    else if (k === '--logs-mib') o.logsMiB = Number(v);
    else throw new Error(`unknown option ${k}`);
  }
  return o;
}

const socketOf = (host: string): string => host.replace(/^unix:\/\//, '');

async function runCycle(c: EngineClient, cmd: string[], networkMode?: string): Promise<void> {
  const body: Record<string, unknown> = { Image: 'busybox:latest', Cmd: cmd };
  if (networkMode) body.HostConfig = { NetworkMode: networkMode };
  const { Id } = JSON.parse((await c.ok('POST', '/v1.41/containers/create', body)).toString()) as {
    Id: string;
  };
  await c.ok('POST', `/v1.41/containers/${Id}/start`);
  const wait = JSON.parse((await c.ok('POST', `/v1.41/containers/${Id}/wait`)).toString()) as {
    StatusCode: number;
  };
  if (wait.StatusCode !== 0) throw new Error(`container exited ${wait.StatusCode}`);
  await c.ok('DELETE', `/v1.41/containers/${Id}?force=1`);
}

export interface Figures {
  cycleMedianMs: number;
  cycleP90Ms: number;
  cycleNoneMedianMs: number;
  concurrentPerSec: number;
  listMedianMs: number;
  inspectMedianMs: number;
  logsMiBps: number;
}

async function measure(host: string, o: Options): Promise<Figures> {
  const c = new EngineClient(socketOf(host));
  await ensureBusybox(c);
  for (let i = 0; i < 3; i++) await runCycle(c, ['true']);

  const cycles: number[] = [];
  for (let i = 0; i < o.iterations; i++) cycles.push((await timed(() => runCycle(c, ['true'])))[0]);
  const none: number[] = [];
  for (let i = 0; i < o.iterations; i++) none.push((await timed(() => runCycle(c, ['true'], 'none')))[0]);

  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < o.concurrentTotal) {
      next++;
      await runCycle(c, ['true']);
    }
  };
  const [concurrentMs] = await timed(() => Promise.all([worker(), worker(), worker(), worker()]));

  const ids: string[] = [];
  for (let i = 0; i < o.list; i++) {
    const r = await c.ok('POST', '/v1.41/containers/create', { Image: 'busybox:latest', Cmd: ['true'] });
    ids.push((JSON.parse(r.toString()) as { Id: string }).Id);
  }
  const lists: number[] = [];
  for (let i = 0; i < 20; i++)
    lists.push((await timed(() => c.ok('GET', '/v1.41/containers/json?all=1')))[0]);
  const inspects: number[] = [];
  for (let i = 0; i < 200; i++) {
    const id = ids[i % ids.length] ?? '';
    inspects.push((await timed(() => c.ok('GET', `/v1.41/containers/${id}/json`)))[0]);
  }
  for (const id of ids) await c.ok('DELETE', `/v1.41/containers/${id}?force=1`);

  // A container writing o.logsMiB MiB of 64-byte lines, then read its whole log once.
  const bytes = o.logsMiB * 1024 * 1024;
  const create = await c.ok('POST', '/v1.41/containers/create', {
    Image: 'busybox:latest',
    Cmd: ['sh', '-c', `yes 0123456789012345678901234567890123456789012345678901234567890 | head -c ${bytes}`],
    HostConfig: { LogConfig: { Type: 'json-file', Config: {} } },
  });
  const logId = (JSON.parse(create.toString()) as { Id: string }).Id;
  await c.ok('POST', `/v1.41/containers/${logId}/start`);
  await c.ok('POST', `/v1.41/containers/${logId}/wait`);
  let received = 0;
  const [logMs] = await timed(() =>
    c.call('GET', `/v1.41/containers/${logId}/logs?stdout=1&stderr=1`, undefined, (d) => {
      received += d.length;
    }),
  );
  await c.ok('DELETE', `/v1.41/containers/${logId}?force=1`);
  if (received < bytes) throw new Error(`logs returned ${received} bytes, expected at least ${bytes}`);
  c.close();
  return {
    cycleMedianMs: median(cycles),
    cycleP90Ms: percentile(cycles, 90),
    cycleNoneMedianMs: median(none),
    concurrentPerSec: (o.concurrentTotal / concurrentMs) * 1000,
    listMedianMs: median(lists),
    inspectMedianMs: median(inspects),
    logsMiBps: bytes / (1024 * 1024) / (logMs / 1000),
  };
}

function printTable(results: Array<[string, Figures]>): void {
  const rows: Array<[string, (f: Figures) => string]> = [
    ['run cycle of `true`, median (ms)', (f) => f.cycleMedianMs.toFixed(1)],
    ['run cycle of `true`, p90 (ms)', (f) => f.cycleP90Ms.toFixed(1)],
    ['run cycle, --network none, median (ms)', (f) => f.cycleNoneMedianMs.toFixed(1)],
    ['4 concurrent clients (containers/s)', (f) => f.concurrentPerSec.toFixed(2)],
    ['list 200 containers, median (ms)', (f) => f.listMedianMs.toFixed(2)],
    ['inspect, median (ms)', (f) => f.inspectMedianMs.toFixed(3)],
    ['logs read throughput (MiB/s)', (f) => f.logsMiBps.toFixed(1)],
  ];
  const header = ['figure', ...results.map(([n]) => n)];
  const body = rows.map(([label, fmt]) => [label, ...results.map(([, f]) => fmt(f))]);
  const widths = header.map((_, i) => Math.max(...[header, ...body].map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => `| ${r.map((c, i) => c.padEnd(widths[i] ?? 0)).join(' | ')} |`;
  console.log(line(header));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const r of body) console.log(line(r));
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  const own = o.berth ? undefined : await startBerth();
  try {
    const results: Array<[string, Figures]> = [];
    console.error('measuring berth...');
    results.push(['berth', await measure(o.berth ?? own?.host ?? '', o)]);
    if (o.reference) {
      console.error('measuring reference...');
      results.push(['dockerd (reference)', await measure(o.reference, o)]);
    }
    printTable(results);
  } finally {
    await own?.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
