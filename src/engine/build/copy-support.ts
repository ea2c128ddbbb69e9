import { cp } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import tarStream from 'tar-stream';
import { resolveInRoot } from '../runtime/oci/rootfs-path.js';
import type { BuilderDeps } from './builder.js';
import type { CopySupport } from './builder.ports.js';
import {
  checkCopyDestination,
  checksumSources,
  fetchAddUrl,
  makeCopyTar,
  receiveContext,
  resolveChownInRootfs,
  resolveCopySources,
} from './context/index.js';

/** A tar with one directory (WORKDIR's, made when missing: 0755, root's). */
function directoryTar(path: string): Readable {
  const pack = tarStream.pack();
  const parts = path.split('/').filter(Boolean);
  for (let n = 1; n <= parts.length; n++) {
    pack.entry({ name: `${parts.slice(0, n).join('/')}/`, type: 'directory', mode: 0o755, uid: 0, gid: 0 });
  }
  pack.finalize();
  return pack as unknown as Readable;
}

/** The context's part as the builder uses it. */
export const copySupport: CopySupport = {
  resolveSources: (root, patterns, o) => resolveCopySources(root, patterns, o),
  checksum: (sources, inline, exclude, known) => checksumSources(sources, inline, exclude, known),
  checkDestination: checkCopyDestination,
  checksumPath: async (root, path, known) =>
    checksumSources(await resolveCopySources(root, [path]), [], [], known),
  scopedPath: (root, path) => resolveInRoot(root, path),
  makeCopyTar: (plan) => makeCopyTar(plan),
  resolveChown: resolveChownInRootfs,
  fetchAddUrl: (url, signal, checksum, dest) => fetchAddUrl(url, signal, checksum, dest),
  directoryTar: (path) => directoryTar(path),
  copyTree: (from, to) => cp(from, to, { recursive: true, verbatimSymlinks: true }),
};

/** The context's receiver (its own work directory below the build's). */
export const receiveBuildContext: BuilderDeps['receiveContext'] = (body, o) => receiveContext(body, o);
