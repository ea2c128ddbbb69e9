import { posix } from 'node:path';
import { invalidParameter } from '../../../common/errors.js';
import type { ExecConfig } from '../runtime.types.js';
import { capabilitySets, tweakCapabilities } from './capabilities.js';
import type { SpecHost } from './host.js';
import { realSpecHost } from './host.js';
import { replaceOrAppendEnv } from './process-env.js';
import type { OciProcess, OciSpec } from './spec.types.js';
import { resolveUserInRootfs } from './user.js';

/**
 * The OCI process of an exec instance, from the container's spec (as moby's exec: the container's
 * environment, user, working directory, capabilities, rlimits; overridden by the exec's fields;
 * TERM=xterm for a TTY; all capabilities when Privileged).
 */
export async function buildExecProcess(
  containerSpec: OciSpec,
  config: ExecConfig,
  opts: { host?: SpecHost; consoleSize?: { height: number; width: number } } = {},
): Promise<OciProcess> {
  if (!config.Cmd || config.Cmd.length === 0) throw invalidParameter('No exec command specified');
  const proc: Partial<OciProcess> = containerSpec.process ?? {};
  const root = containerSpec.root;
  const tty = config.Tty === true;

  let env = [...(proc.env ?? [])];
  if (proc.terminal && !tty) env = env.filter((e) => e !== 'TERM=xterm');
  if (tty && !env.some((e) => e.startsWith('TERM='))) env.push('TERM=xterm');
  env = replaceOrAppendEnv(env, config.Env ?? []);

  let user = proc.user ?? { uid: 0, gid: 0, additionalGids: [0] };
  if (config.User) {
    if (!root?.path) throw invalidParameter('the container has no root filesystem path');
    const u = await resolveUserInRootfs(root.path, config.User, config.GroupAdd ?? []);
    user = { uid: u.uid, gid: u.gid, additionalGids: u.additionalGids };
  }

  let cwd = proc.cwd ?? '/';
  if (config.WorkingDir) {
    cwd = posix.normalize(config.WorkingDir);
    if (!cwd.startsWith('/'))
      throw invalidParameter(
        `the working directory '${config.WorkingDir}' is invalid, it needs to be an absolute path`,
      );
  }

  let caps = proc.capabilities?.bounding ?? [];
  if (config.Privileged)
    caps = tweakCapabilities([], [], true, await (opts.host ?? realSpecHost).capabilityBound());

  const out: OciProcess = {
    terminal: tty,
    user,
    args: [...config.Cmd],
    env,
    cwd,
    capabilities: capabilitySets(caps, user.uid),
    rlimits: proc.rlimits ?? [],
    noNewPrivileges: config.Privileged ? false : (proc.noNewPrivileges ?? false),
  };
  if (proc.oomScoreAdj !== undefined) out.oomScoreAdj = proc.oomScoreAdj;
  if (proc.apparmorProfile) out.apparmorProfile = proc.apparmorProfile;
  if (tty && opts.consoleSize) out.consoleSize = opts.consoleSize;
  return out;
}
