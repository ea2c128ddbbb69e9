/**
 * Pull benchmark: berth beside the reference dockerd, in the same run, pulling one image with a
 * single large layer (random, incompressible content, gzip) from Debian's docker-registry on
 * loopback.
 *
 *   node --import tsx bench/images/pull.bench.ts [--layer-mib 256] [--cold 3] [--warm 10]
 *
 * Cold: the image and its layer removed from the engine before each pull (empty store), the
 * engines taking turns. Warm: pulling again with every layer (and the image) present. Each pull
 * is timed from the request to the end of its JSON message stream. Both engines are started by
 * the benchmark (berth from dist/: `npm run build` first) on their own sockets and roots, and
 * stopped at the end; every loop is bounded.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, existsSync } from 'node:fs';
import { mkdir, readFile, rm, stat } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ReferenceDockerd } from '../../test/helpers/reference-dockerd.js';
import { tempDir } from '../../test/helpers/registry.js';
import { startReferenceRegistry } from '../../test/helpers/registry-reference.js';
import { EngineClient } from '../engine/client.js';
import { median, timed } from '../engine/stats.js';
import { startBerth } from '../engine/targets.js';

interface Options {
  layerMiB: number;
  cold: number;
  warm: number;
}

function parseOptions(argv: string[]): Options {
  const o: Options = { layerMiB: 256, cold: 3, warm: 10 };
  for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], Number(argv[i + 1])];
    if (k === '--layer-mib') o.layerMiB = v;
    else if (k === '--cold') o.cold = v;
    else if (k === '--warm') o.warm = v;
    else throw new Error(`unknown option ${k}`);
  }
  return o;
}

/** A gzipped tar holding one file of `mib` MiB of random bytes (cached in the temp dir). */
async function makeLayer(
  mib: number,
): Promise<{ path: string; digest: string; diffId: string; size: number }> {
  const path = join(tmpdir(), `berth-pull-bench-${mib}m.tar.gz`);
  if (!existsSync(path)) {
    const dir = await tempDir('berth-pull-bench-src-');
    await mkdir(join(dir, 'data'));
    const script = `head -c ${mib}M /dev/urandom > data/random.bin && tar -cf - data | gzip -1 > "${path}.tmp" && mv "${path}.tmp" "${path}"`;
    const r = spawnSync('bash', ['-c', script], { cwd: dir, stdio: 'inherit' });
    await rm(dir, { recursive: true, force: true });
    if (r.status !== 0) throw new Error('making the layer failed');
  }
  // digests of what is on disk (the diff ID by decompressing once)
  const digest = createHash('sha256');
  const diff = createHash('sha256');
  const gunzip = (await import('node:zlib')).createGunzip();
  gunzip.on('data', (c: Buffer) => diff.update(c));
  const done = new Promise((r) => gunzip.on('end', r));
  for await (const c of createReadStream(path)) {
    digest.update(c as Buffer);
    if (!gunzip.write(c)) await new Promise((r) => gunzip.once('drain', r));
  }
  gunzip.end();
  await done;
  return {
    path,
    digest: `sha256:${digest.digest('hex')}`,
    diffId: `sha256:${diff.digest('hex')}`,
    size: (await stat(path)).size,
  };
}

/** A monolithic blob upload (POST, then PUT streaming the file). */
async function pushBlob(base: string, repo: string, digest: string, body: Buffer | string, size: number) {
  const start = await fetch(`${base}/v2/${repo}/blobs/uploads/`, { method: 'POST' });
  if (start.status !== 202) throw new Error(`POST upload: ${start.status}`);
  const loc = new URL(start.headers.get('location') ?? '', base);
  loc.searchParams.set('digest', digest);
  await new Promise<void>((resolve, reject) => {
    const req = request(
      loc,
      {
        method: 'PUT',
        headers: { 'Content-Type': 'application/octet-stream', 'Content-Length': String(size) },
      },
      (res) => {
        res.resume();
        res.on('end', () =>
          res.statusCode === 201 ? resolve() : reject(new Error(`PUT blob ${res.statusCode}`)),
        );
      },
    );
    req.on('error', reject);
    if (typeof body === 'string') createReadStream(body).pipe(req);
    else req.end(body);
  });
}

/**
 * CPU time (ms) a process used so far, its waited-for children included (GNU tar for berth,
 * dockerd's docker-untar re-exec): utime + stime + cutime + cstime of /proc/<pid>/stat.
 */
async function cpuMs(pid: number | undefined): Promise<number> {
  if (pid === undefined) return Number.NaN;
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields 14-17 of proc(5), counted from the state (field 3) at index 0
  const ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(f[i]), 0);
  return (ticks * 1000) / 100;
}

/** Pull through the API; resolves when the message stream ends, rejects on an in-band error. */
async function pull(c: EngineClient, image: string, tag: string): Promise<void> {
  let text = '';
  const r = await c.call(
    'POST',
    `/v1.41/images/create?fromImage=${encodeURIComponent(image)}&tag=${tag}`,
    undefined,
    (d) => {
      text += d.toString();
      if (text.length > 65536) text = text.slice(-65536);
    },
  );
  if (r.status !== 200 || text.includes('"error"')) throw new Error(`pull: ${r.status} ${text.slice(-500)}`);
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  console.log(`making a ${o.layerMiB} MiB random layer...`);
  const layer = await makeLayer(o.layerMiB);
  console.log(`layer ${layer.digest} ${(layer.size / 1048576).toFixed(1)} MiB gzip`);
  const regRoot = await tempDir('berth-pull-bench-reg-');
  const registry = await startReferenceRegistry(regRoot);
  const berth = await startBerth();
  const dockerd = await ReferenceDockerd.start();
  const clients = {
    berth: new EngineClient(berth.host.replace(/^unix:\/\//, '')),
    dockerd: new EngineClient(dockerd.socket),
  };
  try {
    const repo = 'bench/big';
    const image = `${registry.hostPort}/${repo}`;
    await pushBlob(registry.url, repo, layer.digest, layer.path, layer.size);
    const config = JSON.stringify({
      architecture: process.arch === 'arm64' ? 'arm64' : 'amd64',
      os: 'linux',
      config: { Cmd: ['sh'] },
      rootfs: { type: 'layers', diff_ids: [layer.diffId] },
      history: [{ created_by: 'bench' }],
    });
    const configDigest = `sha256:${createHash('sha256').update(config).digest('hex')}`;
    await pushBlob(registry.url, repo, configDigest, Buffer.from(config), Buffer.byteLength(config));
    const manifest = JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
      config: {
        mediaType: 'application/vnd.docker.container.image.v1+json',
        digest: configDigest,
        size: Buffer.byteLength(config),
      },
      layers: [
        {
          mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip',
          digest: layer.digest,
          size: layer.size,
        },
      ],
    });
    const put = await fetch(`${registry.url}/v2/${repo}/manifests/v1`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/vnd.docker.distribution.manifest.v2+json' },
      body: manifest,
    });
    if (put.status !== 201) throw new Error(`PUT manifest ${put.status}`);

    const pids = { berth: berth.pid, dockerd: dockerd.pid };
    const cold: Record<'berth' | 'dockerd', number[]> = { berth: [], dockerd: [] };
    const coldCpu: Record<'berth' | 'dockerd', number[]> = { berth: [], dockerd: [] };
    const warm: Record<'berth' | 'dockerd', number[]> = { berth: [], dockerd: [] };
    for (let i = 0; i < o.cold; i++) {
      for (const name of ['dockerd', 'berth'] as const) {
        const c = clients[name];
        await c.call('DELETE', `/v1.41/images/${encodeURIComponent(`${image}:v1`)}?force=1`);
        const cpu0 = await cpuMs(pids[name]);
        const [ms] = await timed(() => pull(c, image, 'v1'));
        const cpu = (await cpuMs(pids[name])) - cpu0;
        cold[name].push(ms);
        coldCpu[name].push(cpu);
        console.log(`cold pull ${i + 1} ${name}: ${ms.toFixed(0)} ms, engine CPU ${cpu.toFixed(0)} ms`);
      }
    }
    for (let i = 0; i < o.warm; i++) {
      for (const name of ['dockerd', 'berth'] as const) {
        const [ms] = await timed(() => pull(clients[name], image, 'v1'));
        warm[name].push(ms);
      }
    }
    const row = (label: string, b: number[], d: number[]) =>
      `| ${label} | ${b.map((x) => x.toFixed(1)).join(' / ')} (median ${median(b).toFixed(1)}) | ${d
        .map((x) => x.toFixed(1))
        .join(' / ')} (median ${median(d).toFixed(1)}) | ${(median(b) / median(d)).toFixed(2)} |`;
    console.log(`\n| figure (ms) | berth | dockerd | berth/dockerd |\n|---|---|---|---|`);
    console.log(row(`cold pull, ${o.layerMiB} MiB layer`, cold.berth, cold.dockerd));
    console.log(row(`cold pull engine CPU, ${o.layerMiB} MiB layer`, coldCpu.berth, coldCpu.dockerd));
    console.log(row('warm re-pull', warm.berth, warm.dockerd));
  } finally {
    clients.berth.close();
    clients.dockerd.close();
    await berth.stop();
    await dockerd.stop();
    await registry.stop();
    await rm(regRoot, { recursive: true, force: true });
  }
}

await main();
