import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { buildBusyboxRootfs } from '../../src/engine/images/seed.js';
import { TestEngine } from '../../test/helpers/engine.js';
import type { EngineClient } from './client.js';

const repoRoot = resolve(import.meta.dirname, '../..');

/**
 * A berth engine of its own for the benchmark (temp socket and data root): the build in dist/, as
 * `bin/berth` runs it (build first: `npm run build`).
 */
export async function startBerth(runtime?: 'runc' | 'crun'): Promise<{
  host: string;
  pid: number | undefined;
  stop(): Promise<void>;
}> {
  if (!existsSync(join(repoRoot, 'dist/cli/main.js')))
    throw new Error('no build in dist/: run npm run build first');
  const engine = await TestEngine.start({
    logLevel: 'warn',
    compiled: true,
    ...(runtime ? { runtime } : {}),
  });
  return { host: engine.host, pid: engine.pid, stop: () => engine.destroy() };
}

/**
 * Import the busybox rootfs (the one `berth up` seeds) as busybox:latest through the API when the
 * engine under test lacks it, so berth and dockerd run the same image.
 */
export async function ensureBusybox(c: EngineClient): Promise<void> {
  const have = await c.call('GET', '/v1.41/images/busybox:latest/json');
  if (have.status === 200) return;
  const tar = await buildBusyboxRootfs();
  const changes = encodeURIComponent('CMD ["sh"]');
  const r = await c.call(
    'POST',
    `/v1.41/images/create?fromSrc=-&repo=busybox&tag=latest&changes=${changes}`,
    tar,
  );
  if (r.status !== 200 || r.body.toString().includes('"error"')) {
    throw new Error(`importing busybox failed: ${r.status} ${r.body.toString()}`);
  }
}
