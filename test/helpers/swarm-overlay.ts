import { createHash } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { until } from './eventually.js';
import type { NsEngine } from './swarm-netns.js';

/** This engine's overlay namespaces in /run/netns, sorted (overlay-networks.ts names them by its exec root). */
export async function overlayNamespaces(e: NsEngine): Promise<string[]> {
  const tag = createHash('sha256').update(join(e.dir, 'exec')).digest('hex').slice(0, 6);
  return (await readdir('/run/netns').catch(() => [] as string[]))
    .filter((n) => n.startsWith(`berth-ov-${tag}-`))
    .sort();
}

/** The full ID of a running task container of `service` on this engine, waited for up to 30 s. */
export function runningTaskContainer(e: NsEngine, service: string): Promise<string> {
  return until(`a running task of ${service}`, 30_000, async () => {
    const ids = await e.dockerOk([
      'ps',
      '-q',
      '--no-trunc',
      '--filter',
      `label=com.docker.swarm.service.name=${service}`,
    ]);
    return ids.split('\n').filter(Boolean)[0];
  });
}
