import { cp } from 'node:fs/promises';
import { Readable } from 'node:stream';
import tarStream from 'tar-stream';
import type { CopySupport } from './builder.ports.js';
import { receiveContext } from './context/receive.js';
import { resolveInScope } from './context/scoped-path.js';

const pending = (..._args: unknown[]): never => {
  throw new Error('TEMP: context copy functions not merged yet');
};
const checksumPath = pending;
const checksumSources = pending;
const fetchAddUrl = pending;
const makeCopyTar = pending;
const resolveChown = pending;
const resolveCopySources = pending;

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
  resolveSources: (root, patterns, exclude) => resolveCopySources(root, patterns, { exclude }),
  checksum: (sources, inline) => checksumSources(sources, inline),
  checksumPath: (root, path) => checksumPath(root, path),
  scopedPath: (root, path) => resolveInScope(root, path),
  makeCopyTar,
  resolveChown,
  fetchAddUrl,
  directoryTar: (path) => directoryTar(path),
  copyTree: (from, to) => cp(from, to, { recursive: true, verbatimSymlinks: true }),
};

export const receiveBuildContext = (
  body: Readable,
  o: { workDir: string; dockerfile?: string; remote?: string; signal: AbortSignal },
) => receiveContext(body, o);
export { Readable };
