import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join, posix } from 'node:path';
import type { ContainerConfig, MountSpec } from '../../common/docker-types.js';
import { invalidParameter } from '../../common/errors.js';
import type { Instruction, RunMount } from './build.types.js';
import { PREDEFINED_ARGS } from './build-args.js';
import { shellOf } from './step-metadata.js';

type RunInstruction = Extract<Instruction, { kind: 'run' }>;

/** Where the scripts of `RUN <<EOF` with a `#!` line are mounted in the step's container. */
const HEREDOC_DIR = '/dev/pipes';

/**
 * The command a RUN runs. Shell form: the stage's shell with the line; heredocs either make the
 * whole command (`RUN <<EOF`: the body run by the shell, or as a script when it starts with
 * `#!`) or follow the line as the shell reads here-documents itself. Exec form: as written.
 */
export async function runCommand(
  i: RunInstruction,
  config: ContainerConfig,
  scriptDir: () => Promise<string>,
): Promise<{ cmd: string[]; scripts: MountSpec[] }> {
  if (!i.prependShell) return { cmd: [...i.cmdLine], scripts: [] };
  const shell = shellOf(config);
  const line = i.cmdLine.join(' ');
  const only = i.heredocs.length === 1 ? i.heredocs[0] : undefined;
  if (only && /^<<-?["']?\w+["']?$/.test(line.trim())) {
    if (only.content.startsWith('#!')) {
      const dir = await scriptDir();
      await mkdir(dir, { recursive: true });
      const file = join(dir, only.name);
      await writeFile(file, only.content);
      await chmod(file, 0o755);
      return {
        cmd: [posix.join(HEREDOC_DIR, only.name)],
        scripts: [{ Type: 'bind', Source: dir, Target: HEREDOC_DIR, ReadOnly: true }],
      };
    }
    return { cmd: [...shell, only.content], scripts: [] };
  }
  if (i.heredocs.length === 0) return { cmd: [...shell, line], scripts: [] };
  const bodies = i.heredocs.map((h) => `${h.content}${h.name}\n`).join('');
  return { cmd: [...shell, `${line}\n${bodies}`], scripts: [] };
}

/**
 * The Cmd a RUN is committed and cached with (moby's prependEnvOnCmd): `|N NAME=value… <cmd>`
 * with the build args in its environment, predefined proxy args only when the Dockerfile
 * declared them.
 */
export function savedCommand(cmd: string[], args: Array<[string, string]>, declared: Set<string>): string[] {
  if (args.length === 0) return cmd;
  const kept = args
    .filter(([k]) => !PREDEFINED_ARGS.has(k) || declared.has(k))
    .map(([k, v]) => `${k}=${v}`)
    .sort();
  return [`|${kept.length}`, ...kept, ...cmd];
}

/** What a RUN mount becomes once its source is known (host path of a bind, a tmpfs). */
export interface ResolvedMount {
  spec: MountSpec;
  /** For the cache key: what the bind shows (a stage's image, the context path's checksum). */
  keyPart?: string;
  release?: () => Promise<void>;
}

/** Check a RUN mount's fields the executor needs, with buildkit's words. */
export function checkRunMount(m: RunMount): void {
  if (!m.target) throw invalidParameter(`mount type ${m.type} requires a target`);
  if (!posix.isAbsolute(m.target))
    throw invalidParameter(`mount target ${m.target} must be an absolute path`);
  if (m.type === 'secret' || m.type === 'ssh') {
    throw invalidParameter(`RUN --mount=type=${m.type} is not supported by berth's builder`);
  }
}
