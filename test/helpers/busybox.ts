import { access, rename, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildBusyboxRootfs, HOST_BUSYBOX, writeBusyboxTarball } from '../../src/engine/images/seed.js';
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
 * seeds) to `path`; without a path, answer a shared cached file in the temp dir (one per busybox
 * binary, written atomically, never to be deleted by callers). Returns the file's path.
 */
export async function busyboxTarball(path?: string): Promise<string> {
  if (path) return writeBusyboxTarball(path);
  const st = await stat(HOST_BUSYBOX);
  const cached = join(tmpdir(), `berth-busybox-${st.size}-${Math.floor(st.mtimeMs)}.tar`);
  try {
    await access(cached);
    return cached;
  } catch {
    const tmp = `${cached}.${process.pid}.${Date.now()}.tmp`;
    await writeBusyboxTarball(tmp);
    await rename(tmp, cached);
    return cached;
  }
}

/**
 * Make sure `ref` (busybox:latest) exists in a test engine, importing the busybox rootfs through
 * the docker CLI with seedBusybox's config when it is missing. Returns the image ID.
 */
export async function ensureBusybox(engine: TestEngine, ref = 'busybox:latest'): Promise<string> {
  const have = await engine.docker(['image', 'inspect', '--format', '{{.Id}}', ref]);
  if (have.code === 0) return have.stdout.trim();
  return engine.dockerOk(['import', ...BUSYBOX_CHANGES, await busyboxTarball(), ref]);
}
