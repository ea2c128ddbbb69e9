import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildBusyboxRootfs, writeBusyboxTarball } from '../../src/engine/images/seed.js';

export { buildBusyboxRootfs };

/**
 * Write the busybox rootfs tarball (from the host's busybox-static, the same one `berth up`
 * seeds) to `path`, or to a new temp dir; returns the file's path. For tests that `docker import`.
 */
export async function busyboxTarball(path?: string): Promise<string> {
  const target = path ?? join(await mkdtemp(join(tmpdir(), 'berth-busybox-')), 'busybox.tar');
  return writeBusyboxTarball(target);
}
