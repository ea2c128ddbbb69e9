import { errorMessage, systemError } from '../../../common/errors.js';
import { runTool } from '../../../common/host/run-tool.js';
import { HostStorageOps, tarDirectory } from '../../storage/adapters/host.ops.js';
import { decompress } from '../../storage/layer.apply.js';
import type { ArchiveHost } from '../archive/archive.host.js';

async function tool(cmd: string, args: string[]): Promise<void> {
  const r = await runTool(cmd, args);
  if (r.code !== 0) throw new Error(r.stderr.trim() || `${cmd} exited with ${r.code}`);
}

const storageOps = new HostStorageOps();

/** The archive room's host calls, with the host's tools (coreutils, attr, GNU tar). */
export const hostArchive: ArchiveHost = {
  unpack: (raw) => decompress(raw, storageOps, () => undefined, 'archive'),
  mknod: (path, kind, mode, major, minor) =>
    tool('mknod', ['-m', mode.toString(8), path, kind, String(major), String(minor)]),
  mkfifo: (path, mode) => tool('mkfifo', ['-m', mode.toString(8), path]),
  removeTree: (path) => tool('rm', ['-rf', '--one-file-system', '--', path]),
  async opaqueDirs(upper) {
    // one getfattr walk: `# file: <path>` then its attributes
    const r = await runTool(
      'getfattr',
      ['-R', '-h', '--absolute-names', '-n', 'trusted.overlay.opaque', '-e', 'text', upper],
      { stdout: true, stderrLimit: 1024 },
    );
    const out = new Set<string>();
    let file = '';
    for (const line of r.stdout.split('\n')) {
      if (line.startsWith('# file: ')) file = line.slice(8);
      else if (line === 'trusted.overlay.opaque="y"' && file) out.add(file);
    }
    return out;
  },
  tar(dir, members, extraArgs = []) {
    const tar = tarDirectory(dir, members, extraArgs);
    // tar names members relative to dir: the message keeps them and drops dir itself
    const done = tar.done.catch((err) => {
      throw systemError(
        `tar: ${errorMessage(err)
          .replace(`tar -c ${dir}: `, '')
          .replace(/^tar: /, '')}`,
      );
    });
    done.catch(() => undefined);
    return { ...tar, done };
  },
};
