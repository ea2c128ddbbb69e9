import type { HealthConfig } from '../../../common/docker-types.js';
import { invalidParameter } from '../../../common/errors.js';
import { goQuote, parseGoDuration, parseGoInt, trimSpace } from './go-text.js';
import type { DockerfileNode } from './parser.js';

/** Parsed Dockerfile nodes turned into commands as buildkit's instructions package does: argument counts, builder flags, HEALTHCHECK options. */
/** Builder flags of one instruction (BFlags): string, boolean (`--link`, `--link=false`) and repeatable flags. */
export class BuilderFlags {
  private readonly defined = new Map<
    string,
    { type: 'string' | 'bool' | 'strings'; value: string; values: string[] }
  >();
  private readonly used = new Set<string>();

  constructor(private readonly args: string[]) {}

  private add(name: string, type: 'string' | 'bool' | 'strings') {
    const flag = { type, value: '', values: [] as string[] };
    this.defined.set(name, flag);
    return flag;
  }

  addString(name: string): { value: string } {
    return this.add(name, 'string');
  }

  /** A boolean flag: `value` is "true" or "false" after parse ("" when absent). */
  addBool(name: string): { value: string } {
    return this.add(name, 'bool');
  }

  /** A repeatable flag: every value in order. */
  addStrings(name: string): { values: string[] } {
    return this.add(name, 'strings');
  }

  /** Whether the flag was given. */
  isUsed(name: string): boolean {
    return this.used.has(name);
  }

  parse(): void {
    for (const raw of this.args) {
      if (!raw.startsWith('--')) throw invalidParameter(`Arg should start with -- : ${raw}`);
      if (raw === '--') return;
      let name = raw.slice(2);
      let value = '';
      const eq = name.indexOf('=');
      if (eq >= 0) {
        value = name.slice(eq + 1);
        name = name.slice(0, eq);
      }
      const flag = this.defined.get(name);
      if (!flag) throw invalidParameter(`Unknown flag: ${name}`);
      if (this.used.has(name) && flag.type !== 'strings')
        throw invalidParameter(`Duplicate flag specified: ${name}`);
      this.used.add(name);
      if (flag.type === 'bool') {
        if (eq >= 0 && value === '') throw invalidParameter(`Missing a value on flag: ${name}`);
        const lower = value.toLowerCase();
        if (lower === '') flag.value = 'true';
        else if (lower === 'true' || lower === 'false') flag.value = lower;
        else throw invalidParameter(`Expecting boolean value for flag ${name}, not: ${value}`);
        continue;
      }
      if (eq < 0) throw invalidParameter(`Missing a value on flag: ${name}`);
      flag.value = value;
      flag.values.push(value);
    }
  }
}

export type Command =
  | { kind: 'env' | 'label'; pairs: Array<[string, string]> }
  | { kind: 'cmd' | 'entrypoint'; cmdLine: string[] | null; prependShell: boolean }
  | { kind: 'expose'; ports: string[] }
  | { kind: 'user' | 'workdir' | 'stopsignal'; value: string }
  | { kind: 'volume'; volumes: string[] }
  | { kind: 'onbuild'; expression: string }
  | { kind: 'healthcheck'; health: HealthConfig };

export function parseKvps(args: string[], name: string): Array<[string, string]> {
  if (args.length === 0) throw invalidParameter(`${name} requires at least one argument`);
  if (args.length % 2 !== 0) throw invalidParameter(`Bad input to ${name}, too many arguments`);
  const pairs: Array<[string, string]> = [];
  for (let j = 0; j < args.length; j += 2) {
    if (args[j] === '') throw invalidParameter(`${name} names can not be blank`);
    pairs.push([args[j] as string, args[j + 1] as string]);
  }
  return pairs;
}

/** CMD / ENTRYPOINT: the exec form as is, the shell form as one string (handleJSONArgs). */
export function shellDependentCmdLine(node: DockerfileNode, emptyAsNil: boolean) {
  const args = node.args.length === 0 ? [] : node.json ? node.args : [node.args.join(' ')];
  return { cmdLine: emptyAsNil && args.length === 0 ? null : args, prependShell: !node.json };
}

/** A flag duration; unset is 0, less than 1ms (0 included) an error. */
export function parseOptInterval(name: string, value: string): number {
  if (value === '') return 0;
  const ns = parseGoDuration(value);
  if (ns < 1e6) throw invalidParameter(`Interval ${goQuote(name)} cannot be less than 1ms`);
  return ns;
}

export function parseHealthcheck(node: DockerfileNode): HealthConfig {
  if (node.args.length === 0) throw invalidParameter('HEALTHCHECK requires at least one argument');
  const type = (node.args[0] as string).toUpperCase();
  const args = node.args.slice(1);
  if (type === 'NONE') {
    if (args.length !== 0) throw invalidParameter('HEALTHCHECK NONE takes no arguments');
    return { Test: ['NONE'] };
  }
  const flags = new BuilderFlags(node.flags);
  const interval = flags.addString('interval');
  const timeout = flags.addString('timeout');
  const startPeriod = flags.addString('start-period');
  const retries = flags.addString('retries');
  flags.parse();
  if (type !== 'CMD') throw invalidParameter(`Unknown type ${goQuote(type)} in HEALTHCHECK (try CMD)`);
  const cmd = args.length === 0 ? [] : node.json ? args : [args.join(' ')];
  if (cmd.length === 0) throw invalidParameter('Missing command after HEALTHCHECK CMD');
  const health: HealthConfig = { Test: [node.json ? 'CMD' : 'CMD-SHELL', ...cmd] };
  const durations: Array<['Interval' | 'Timeout' | 'StartPeriod', string, string]> = [
    ['Interval', 'interval', interval.value],
    ['Timeout', 'timeout', timeout.value],
    ['StartPeriod', 'start-period', startPeriod.value],
  ];
  for (const [field, name, value] of durations) {
    const ns = parseOptInterval(name, value);
    if (ns !== 0) health[field] = ns;
  }
  if (retries.value !== '') {
    const n = parseGoInt(retries.value, 32);
    if (n < 1) throw invalidParameter(`--retries must be at least 1 (not ${n})`);
    health.Retries = n;
  }
  return health;
}

/** Byte-wise order, as Go's sort.Strings. */
export const byteOrder = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));

export function parseCommand(node: DockerfileNode): Command {
  const flags = new BuilderFlags(node.flags);
  switch (node.value) {
    case 'env':
    case 'label': {
      flags.parse();
      return { kind: node.value, pairs: parseKvps(node.args, node.value.toUpperCase()) };
    }
    case 'cmd':
    case 'entrypoint': {
      flags.parse();
      return { kind: node.value, ...shellDependentCmdLine(node, node.value === 'entrypoint') };
    }
    case 'expose': {
      if (node.args.length === 0) throw invalidParameter('EXPOSE requires at least one argument');
      flags.parse();
      return { kind: 'expose', ports: [...node.args].sort(byteOrder) };
    }
    case 'user':
    case 'workdir':
    case 'stopsignal': {
      if (node.args.length !== 1) {
        throw invalidParameter(`${node.value.toUpperCase()} requires exactly one argument`);
      }
      flags.parse();
      return { kind: node.value, value: node.args[0] as string };
    }
    case 'volume': {
      if (node.args.length === 0) throw invalidParameter('VOLUME requires at least one argument');
      flags.parse();
      const volumes = node.args.map((v) => {
        const t = trimSpace(v);
        if (t === '') throw invalidParameter('VOLUME specified can not be an empty string');
        return t;
      });
      return { kind: 'volume', volumes };
    }
    case 'onbuild': {
      if (node.args.length === 0) throw invalidParameter('ONBUILD requires at least one argument');
      flags.parse();
      const trigger = trimSpace(node.args[0] as string).toUpperCase();
      if (trigger === 'ONBUILD')
        throw invalidParameter("Chaining ONBUILD via `ONBUILD ONBUILD` isn't allowed");
      if (trigger === 'MAINTAINER' || trigger === 'FROM') {
        throw invalidParameter(`${trigger} isn't allowed as an ONBUILD trigger`);
      }
      return { kind: 'onbuild', expression: node.original.replace(/^[\t\n\f\r ]*ONBUILD[\t\n\f\r ]*/i, '') };
    }
    case 'healthcheck':
      return { kind: 'healthcheck', health: parseHealthcheck(node) };
    default:
      throw invalidParameter(`${node.value} is not a valid change command`);
  }
}
