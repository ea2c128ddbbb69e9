import type { ContainerConfig } from '../../common/docker-types.js';
import { invalidParameter } from '../../common/errors.js';
import type { Instruction } from './build.types.js';
import { setEnv } from './build-args.js';

/** The stage's shell for a shell-form command: SHELL's, else /bin/sh -c. */
export const shellOf = (config: ContainerConfig): string[] =>
  config.Shell?.length ? [...config.Shell] : ['/bin/sh', '-c'];

const NOP = '#(nop) ';

/**
 * The container Cmd a metadata step commits, from the front end's history text: moby's
 * withCmdComment `<shell> "#(nop) " <text>` (its history shows two spaces), or for WORKDIR, COPY
 * and ADD withCmdCommentString `<shell> "#(nop) <text>"`. The shell is the stage's before the step.
 */
export function nopArgv(history: string, shell: string[], oneArg: boolean): string[] {
  const at = history.indexOf(NOP);
  if (at < 0) throw new Error(`not a #(nop) history text: ${history}`);
  const text = history.slice(at + NOP.length);
  return oneArg ? [...shell, `${NOP}${text}`] : [...shell, NOP, text.replace(/^ /, '')];
}

const META_KINDS = [
  'env',
  'label',
  'maintainer',
  'expose',
  'user',
  'stopsignal',
  'volume',
  'shell',
  'cmd',
  'entrypoint',
  'healthcheck',
  'onbuild',
] as const;
type MetaInstruction = Exclude<Instruction, { kind: 'run' | 'copy' | 'add' | 'arg' }>;

export const isMetadata = (i: Instruction): i is MetaInstruction =>
  (META_KINDS as readonly string[]).includes(i.kind);

/** What a metadata step does to the stage. */
export interface MetadataChange {
  config: ContainerConfig;
  /** MAINTAINER: the stage's author from now on. */
  maintainer?: string;
  /** CMD given in this stage (an ENTRYPOINT then keeps it). */
  cmdSet?: boolean;
}

/** The ports of an EXPOSE word as the config keys them (`80` → `80/tcp`, a range each port). */
function portKeys(p: string): string[] {
  const [port, proto = 'tcp'] = p.split('/');
  const m = /^(\d+)(?:-(\d+))?$/.exec(port ?? '');
  if (!m) throw invalidParameter(`Invalid containerPort: ${p}`);
  const first = Number(m[1]);
  const last = m[2] === undefined ? first : Number(m[2]);
  if (last < first) throw invalidParameter(`Invalid range specified for the Port: ${p}`);
  const out: string[] = [];
  for (let n = first; n <= last; n++) out.push(`${n}/${proto.toLowerCase()}`);
  return out;
}

/**
 * Apply an expanded metadata instruction to the stage's config, as dockerd's classic builder's
 * dispatchers do.
 */
export function applyMetadata(i: MetaInstruction, base: ContainerConfig, cmdSet: boolean): MetadataChange {
  const config: ContainerConfig = { ...base };
  switch (i.kind) {
    case 'env': {
      let env = [...(config.Env ?? [])];
      for (const [k, v] of i.pairs) env = setEnv(env, k, v);
      config.Env = env;
      return { config };
    }
    case 'label':
      config.Labels = { ...(config.Labels ?? {}), ...Object.fromEntries(i.pairs) };
      return { config };
    case 'maintainer':
      return { config, maintainer: i.value };
    case 'expose': {
      const exposed = { ...(config.ExposedPorts ?? {}) };
      for (const p of i.ports) for (const k of portKeys(p)) exposed[k] = {};
      config.ExposedPorts = exposed;
      return { config };
    }
    case 'workdir':
      throw invalidParameter('WORKDIR is a step of its own');
    case 'user':
      config.User = i.value;
      return { config };
    case 'stopsignal':
      config.StopSignal = i.value;
      return { config };
    case 'volume':
      config.Volumes = { ...(config.Volumes ?? {}), ...Object.fromEntries(i.volumes.map((v) => [v, {}])) };
      return { config };
    case 'shell':
      config.Shell = [...i.shell];
      return { config };
    case 'cmd':
      config.Cmd = i.prependShell ? [...shellOf(base), ...i.cmdLine] : [...i.cmdLine];
      return { config, cmdSet: true };
    case 'entrypoint':
      config.Entrypoint = i.prependShell ? [...shellOf(base), ...i.cmdLine] : [...i.cmdLine];
      // an ENTRYPOINT drops the base image's CMD unless this stage set one (moby)
      if (!cmdSet) config.Cmd = null;
      return { config };
    case 'healthcheck': {
      const h = i.health;
      config.Healthcheck = h.Test?.length === 1 && h.Test[0] === 'NONE' ? { Test: ['NONE'] } : { ...h };
      return { config };
    }
    case 'onbuild':
      config.OnBuild = [...(config.OnBuild ?? []), i.expression];
      return { config };
  }
}
