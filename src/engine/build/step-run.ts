import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { join, posix } from 'node:path';
import type { MountSpec } from '../../common/docker-types.js';
import { invalidParameter } from '../../common/errors.js';
import type { RunMount } from './build.types.js';

/**
 * The script of `RUN <<EOF` with a `#!` line: written (0755) into a directory of the build's, which
 * is bound read-only where the command expects it (`/dev/pipes/EOF`).
 */
export async function scriptMount(
  workDir: string,
  script: { path: string; content: string },
): Promise<MountSpec> {
  const dir = await mkdtemp(join(workDir, 'heredoc-'));
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, posix.basename(script.path)), script.content, { mode: 0o755 });
  return { Type: 'bind', Source: dir, Target: posix.dirname(script.path), ReadOnly: true };
}

/** Check a RUN mount's fields the executor needs, with buildkit's words. */
export function checkRunMount(m: RunMount): void {
  if (!m.target) throw invalidParameter(`mount type ${m.type} requires a target`);
  if (m.type === 'secret' || m.type === 'ssh') {
    throw invalidParameter(`RUN --mount=type=${m.type} is not supported by berth's builder`);
  }
}
