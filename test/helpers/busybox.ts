import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { buildBusyboxRootfs, writeBusyboxTarball } from '../../src/engine/images/seed.js';
import type { TestEngine } from './engine.js';

export { buildBusyboxRootfs };

/** The config seedBusybox gives busybox:latest, as `docker import --change` flags. */
export const BUSYBOX_CHANGES = [
  '--change',
  'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  '--change',
  'CMD ["sh"]',
];

/**
 * Write the busybox rootfs tarball (from the host's busybox-static, the same one `berth up`
 * seeds) to `path`, or to a new temp dir; returns the file's path. For tests that `docker import`.
 */
export async function busyboxTarball(path?: string): Promise<string> {
  const target = path ?? join(await mkdtemp(join(tmpdir(), 'berth-busybox-')), 'busybox.tar');
  return writeBusyboxTarball(target);
}

/**
 * Make sure `ref` (busybox:latest) exists in a test engine, importing the busybox rootfs through
 * the docker CLI with seedBusybox's config when it is missing. Returns the image ID.
 */
export async function ensureBusybox(engine: TestEngine, ref = 'busybox:latest'): Promise<string> {
  const have = await engine.docker(['image', 'inspect', '--format', '{{.Id}}', ref]);
  if (have.code === 0) return have.stdout.trim();
  const tar = await busyboxTarball();
  try {
    return await engine.dockerOk(['import', ...BUSYBOX_CHANGES, tar, ref]);
  } finally {
    await rm(dirname(tar), { recursive: true, force: true });
  }
}
