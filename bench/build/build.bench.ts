/**
 * Build benchmark: `docker build` of a 10-step Dockerfile (FROM busybox, COPY of a 50 MiB context,
 * RUN steps, metadata steps) against berth and against the reference dockerd 20.10's classic
 * builder, in the same run, with the same docker CLI and context.
 *
 *   node --import tsx bench/build/build.bench.ts [--context-mib 50] [--cold 3] [--cached 5]
 *
 * Cold: `--no-cache` (every step runs; the base image is present). Fully cached: the same build
 * again, every step from the cache. Each build is timed as the CLI process, from its start to its
 * exit (sending the context included). The engines take turns, dockerd first. Both engines are
 * started by the benchmark (berth from dist/: `npm run build` first) on their own sockets and
 * roots, and stopped at the end; every loop is bounded.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ReferenceDockerd } from '../../test/helpers/reference-dockerd.js';
import { tempDir } from '../../test/helpers/registry.js';
import { EngineClient } from '../engine/client.js';
import { median } from '../engine/stats.js';
import { ensureBusybox, startBerth } from '../engine/targets.js';

interface Options {
  contextMiB: number;
  cold: number;
  cached: number;
}

function parseOptions(argv: string[]): Options {
  const o: Options = { contextMiB: 50, cold: 3, cached: 5 };
  for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], Number(argv[i + 1])];
    if (k === '--context-mib') o.contextMiB = v;
    else if (k === '--cold') o.cold = v;
    else if (k === '--cached') o.cached = v;
    else throw new Error(`unknown option ${k}`);
  }
  return o;
}

/** Ten instructions, FROM included: one COPY of the whole context, three RUNs, six metadata steps. */
const DOCKERFILE = `FROM busybox:latest
COPY data /data
RUN cat /data/* | wc -c > /size
ENV BENCH=1
RUN echo hello > /hello
WORKDIR /app
RUN ls /data > /app/list && test -s /size
LABEL bench=build
EXPOSE 8080
CMD ["sh"]
`;

/** A context of `mib` files of 1 MiB of random bytes, and the Dockerfile. */
async function makeContext(mib: number): Promise<string> {
  const dir = await tempDir('berth-build-bench-ctx-');
  await mkdir(join(dir, 'data'));
  for (let i = 0; i < mib; i++) await writeFile(join(dir, 'data', `f${i}.bin`), randomBytes(1024 * 1024));
  await writeFile(join(dir, 'Dockerfile'), DOCKERFILE);
  return dir;
}

/** One `docker build` as a process; its wall time in ms (rejects when the build fails). */
function build(host: string, context: string, extra: string[], env: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    const child = spawn(
      'docker',
      ['-H', host, 'build', '-q', '-t', 'bench/build:latest', ...extra, context],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, ...env },
      },
    );
    let err = '';
    child.stderr.on('data', (d: Buffer) => {
      err = (err + d.toString()).slice(-4000);
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 600_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      const ms = Number(process.hrtime.bigint() - start) / 1e6;
      if (code === 0) resolve(ms);
      else reject(new Error(`docker build against ${host} exited ${code}: ${err}`));
    });
  });
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  const context = await makeContext(o.contextMiB);
  const berth = await startBerth();
  const dockerd = await ReferenceDockerd.start();
  const engines = {
    dockerd: { host: dockerd.host, env: { DOCKER_BUILDKIT: '0', DOCKER_CONFIG: dockerd.dockerConfig } },
    berth: { host: berth.host, env: {} as Record<string, string> },
  };
  const clients = [new EngineClient(berth.host.replace(/^unix:\/\//, '')), new EngineClient(dockerd.socket)];
  try {
    for (const c of clients) await ensureBusybox(c);
    const cold = { berth: [] as number[], dockerd: [] as number[] };
    const cached = { berth: [] as number[], dockerd: [] as number[] };
    for (let i = 0; i < o.cold; i++) {
      for (const name of ['dockerd', 'berth'] as const) {
        const e = engines[name];
        const ms = await build(e.host, context, ['--no-cache'], e.env);
        cold[name].push(ms);
        console.log(`cold build ${i + 1} ${name}: ${ms.toFixed(0)} ms`);
      }
    }
    for (let i = 0; i < o.cached; i++) {
      for (const name of ['dockerd', 'berth'] as const) {
        const e = engines[name];
        cached[name].push(await build(e.host, context, [], e.env));
      }
    }
    const row = (label: string, b: number[], d: number[]) =>
      `| ${label} | ${b.map((x) => x.toFixed(0)).join(' / ')} (median ${median(b).toFixed(0)}) | ${d
        .map((x) => x.toFixed(0))
        .join(' / ')} (median ${median(d).toFixed(0)}) | ${(median(b) / median(d)).toFixed(2)} |`;
    console.log(`\n| figure (ms) | berth | dockerd | berth/dockerd |\n|---|---|---|---|`);
    console.log(row(`cold build (--no-cache), ${o.contextMiB} MiB context`, cold.berth, cold.dockerd));
    console.log(row('fully cached build', cached.berth, cached.dockerd));
  } finally {
    for (const c of clients) c.close();
    await berth.stop();
    await dockerd.stop();
    await rm(context, { recursive: true, force: true });
  }
}

await main();
