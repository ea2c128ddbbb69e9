import type { ContainerConfig, HealthConfig } from '../../common/docker-types.js';
import { invalidParameter } from '../../common/errors.js';
import { goQuote } from '../images/dockerfile/go-text.js';
import type { Instruction } from './build.types.js';
import { setEnv } from './build-args.js';

/** The words a metadata step works on, expanded (the stage runner expands them first). */
export type Expand = (word: string) => string;
export type ExpandWords = (word: string) => string[];

/** Go's %q of a []string: `["a" "b c"]`. */
const goQuoteList = (l: readonly string[]): string => `[${l.map(goQuote).join(' ')}]`;

/** Go's time.Duration String() for nanoseconds. */
export function goDuration(ns: number): string {
  if (ns === 0) return '0s';
  const neg = ns < 0;
  let n = Math.abs(ns);
  if (n < 1e9) {
    const [unit, div] = n < 1e3 ? ['ns', 1] : n < 1e6 ? ['µs', 1e3] : ['ms', 1e6];
    return `${neg ? '-' : ''}${String(n / (div as number))}${unit}`;
  }
  const h = Math.floor(n / 3.6e12);
  n -= h * 3.6e12;
  const m = Math.floor(n / 6e10);
  n -= m * 6e10;
  const s = String(n / 1e9);
  const text = h ? `${h}h${m}m${s}s` : m ? `${m}m${s}s` : `${s}s`;
  return `${neg ? '-' : ''}${text}`;
}

/** Go's %q of an int (a rune literal). */
function goRune(n: number): string {
  if (n >= 0x20 && n < 0x7f)
    return n === 0x27 || n === 0x5c ? `'\\${String.fromCharCode(n)}'` : `'${String.fromCharCode(n)}'`;
  return `'\\x${n.toString(16).padStart(2, '0')}'`;
}

/** dockerd 20.10's `HEALTHCHECK %q` of the config pointer. */
function healthText(h: HealthConfig): string {
  const parts = [
    goQuoteList(h.Test ?? []),
    goQuote(goDuration(h.Interval ?? 0)),
    goQuote(goDuration(h.Timeout ?? 0)),
    goQuote(goDuration(h.StartPeriod ?? 0)),
    goRune(h.Retries ?? 0),
  ];
  return `&{${parts.join(' ')}}`;
}

/** The stage's shell for a shell-form command: SHELL's, else /bin/sh -c. */
export const shellOf = (config: ContainerConfig): string[] =>
  config.Shell?.length ? [...config.Shell] : ['/bin/sh', '-c'];

/** The container Cmd of a metadata step (moby's withCmdComment): `<shell> "#(nop) " <text>`. */
export const nopCmd = (config: ContainerConfig, text: string): string[] => [
  ...shellOf(config),
  '#(nop) ',
  text,
];
/** moby's withCmdCommentString (WORKDIR, COPY, ADD): `<shell> "#(nop) <text>"`. */
export const nopCmdString = (config: ContainerConfig, text: string): string[] => [
  ...shellOf(config),
  `#(nop) ${text}`,
];

/** What a metadata step does to the stage: the new config, and its history text. */
export interface MetadataChange {
  config: ContainerConfig;
  /** The committed container's Cmd (the history's created_by). */
  cmd: string[];
  /** MAINTAINER: the stage's author from now on. */
  maintainer?: string;
  /** CMD given in this stage (an ENTRYPOINT then keeps it). */
  cmdSet?: boolean;
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

/** A port of EXPOSE as the config keys it (`80` → `80/tcp`). */
function portKey(p: string): string {
  const [port, proto = 'tcp'] = p.split('/');
  if (!port || !/^\d+(-\d+)?$/.test(port)) throw invalidParameter(`Invalid containerPort: ${p}`);
  return `${port}/${proto.toLowerCase()}`;
}

/**
 * Apply a metadata instruction to the stage's config, as dockerd's classic builder's dispatchers
 * do, with the `#(nop)` text it commits.
 */
export function applyMetadata(
  i: MetaInstruction,
  base: ContainerConfig,
  expand: Expand,
  expandWords: ExpandWords,
  cmdSet: boolean,
): MetadataChange {
  const config: ContainerConfig = { ...base };
  switch (i.kind) {
    case 'env': {
      let env = [...(config.Env ?? [])];
      const texts: string[] = [];
      for (const [k, v] of i.pairs) {
        const name = expand(k);
        const value = expand(v);
        env = setEnv(env, name, value);
        texts.push(`${name}=${value}`);
      }
      config.Env = env;
      return { config, cmd: nopCmd(base, `ENV ${texts.join(' ')}`) };
    }
    case 'label': {
      const labels = { ...(config.Labels ?? {}) };
      const texts: string[] = [];
      for (const [k, v] of i.pairs) {
        const name = expand(k);
        const value = expand(v);
        labels[name] = value;
        texts.push(`${name}=${value}`);
      }
      config.Labels = labels;
      return { config, cmd: nopCmd(base, `LABEL ${texts.join(' ')}`) };
    }
    case 'maintainer':
      return { config, cmd: nopCmd(base, `MAINTAINER ${i.value}`), maintainer: i.value };
    case 'expose': {
      const ports = i.ports.flatMap((p) => expandWords(p));
      const exposed = { ...(config.ExposedPorts ?? {}) };
      for (const p of ports) exposed[portKey(p)] = {};
      config.ExposedPorts = exposed;
      return { config, cmd: nopCmd(base, `EXPOSE ${ports.join(' ')}`) };
    }
    case 'workdir':
    case 'user':
    case 'stopsignal': {
      const value = expand(i.value);
      if (i.kind === 'user') config.User = value;
      else if (i.kind === 'stopsignal') config.StopSignal = value;
      else throw invalidParameter('WORKDIR is a step of its own');
      return { config, cmd: nopCmd(base, `${i.kind.toUpperCase()} ${value}`) };
    }
    case 'volume': {
      const vols = i.volumes.map((v) => expand(v));
      const map = { ...(config.Volumes ?? {}) };
      for (const v of vols) {
        if (!v.trim()) throw invalidParameter('VOLUME specified can not be an empty string');
        map[v] = {};
      }
      config.Volumes = map;
      return { config, cmd: nopCmd(base, `VOLUME [${vols.join(' ')}]`) };
    }
    case 'shell':
      config.Shell = [...i.shell];
      return { config, cmd: nopCmd(base, `SHELL [${i.shell.join(' ')}]`) };
    case 'cmd': {
      const cmd = i.prependShell ? [...shellOf(base), ...i.cmdLine] : [...i.cmdLine];
      config.Cmd = cmd;
      if (i.prependShell) config.ArgsEscaped = undefined;
      return { config, cmd: nopCmd(base, `CMD ${goQuoteList(cmd)}`), cmdSet: true };
    }
    case 'entrypoint': {
      const ep = i.prependShell ? [...shellOf(base), ...i.cmdLine] : [...i.cmdLine];
      config.Entrypoint = ep;
      // an ENTRYPOINT drops the base image's CMD unless this stage set one (moby)
      if (!cmdSet) config.Cmd = null;
      return { config, cmd: nopCmd(base, `ENTRYPOINT ${goQuoteList(ep)}`) };
    }
    case 'healthcheck': {
      const h = i.health;
      if (h.Test && h.Test.length === 1 && h.Test[0] === 'NONE') config.Healthcheck = { Test: ['NONE'] };
      else config.Healthcheck = { ...h };
      return { config, cmd: nopCmd(base, `HEALTHCHECK ${healthText(config.Healthcheck)}`) };
    }
    case 'onbuild':
      config.OnBuild = [...(config.OnBuild ?? []), i.expression];
      return { config, cmd: nopCmd(base, `ONBUILD ${i.expression}`) };
  }
}
