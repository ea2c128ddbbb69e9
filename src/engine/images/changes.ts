import { posix } from 'node:path';
import type { ContainerConfig, HealthConfig } from '../../common/docker-types.js';
import { invalidParameter } from '../../common/errors.js';
import { parseSignal } from '../containers/signals.js';

/**
 * `changes` of import and commit: Dockerfile instructions applied to an image config, as
 * dockerd's BuildFromConfig does. Allowed: CMD, ENTRYPOINT, ENV, EXPOSE, HEALTHCHECK, LABEL,
 * ONBUILD, STOPSIGNAL, USER, VOLUME, WORKDIR; JSON (exec) and shell forms.
 */

const ALLOWED = new Set([
  'cmd',
  'entrypoint',
  'env',
  'expose',
  'healthcheck',
  'label',
  'onbuild',
  'stopsignal',
  'user',
  'volume',
  'workdir',
]);
const KNOWN = new Set([...ALLOWED, 'from', 'maintainer', 'run', 'add', 'copy', 'arg', 'shell']);

/** Split the joined changes into logical lines (backslash continuation, comments, blanks). */
export function dockerfileLines(text: string): string[] {
  const out: string[] = [];
  let cur = '';
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/\s+$/, '');
    if (cur === '' && /^\s*#/.test(line)) continue;
    if (line.endsWith('\\')) {
      cur += line.slice(0, -1);
      continue;
    }
    cur += line;
    if (cur.trim() !== '') out.push(cur.trim());
    cur = '';
  }
  if (cur.trim() !== '') out.push(cur.trim());
  return out;
}

/** The exec form of an instruction argument, or undefined for the shell form. */
export function jsonForm(rest: string): string[] | undefined {
  const t = rest.trim();
  if (!t.startsWith('[')) return undefined;
  try {
    const v = JSON.parse(t) as unknown;
    if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v as string[];
  } catch {
    return undefined;
  }
  return undefined;
}

function envLookup(env: string[] | null | undefined, name: string): string | undefined {
  for (let i = (env ?? []).length - 1; i >= 0; i--) {
    const kv = (env ?? [])[i] as string;
    const eq = kv.indexOf('=');
    if ((eq < 0 ? kv : kv.slice(0, eq)) === name) return eq < 0 ? '' : kv.slice(eq + 1);
  }
  return undefined;
}

/**
 * Shell-like word processing of the Dockerfile (moby's shell lexer, the common part): quotes,
 * backslash escapes, `$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR:+alt}`. Returns the words.
 */
export function processWords(text: string, env: string[] | null | undefined): string[] {
  const words: string[] = [];
  let cur = '';
  let inWord = false;
  let i = 0;
  const expand = (): string => {
    // at '$'
    i++;
    if (text[i] === '{') {
      const close = text.indexOf('}', i);
      if (close < 0) throw invalidParameter(`missing '}' in ${JSON.stringify(text)}`);
      const body = text.slice(i + 1, close);
      i = close + 1;
      const m = /^([A-Za-z_][A-Za-z0-9_]*)(?::([-+])(.*))?$/.exec(body);
      if (!m) throw invalidParameter(`bad substitution in ${JSON.stringify(text)}`);
      const val = envLookup(env, m[1] as string);
      if (m[2] === '-') return val === undefined || val === '' ? (m[3] ?? '') : val;
      if (m[2] === '+') return val === undefined || val === '' ? '' : (m[3] ?? '');
      return val ?? '';
    }
    const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i));
    if (!m) return '$';
    i += m[0].length;
    return envLookup(env, m[0]) ?? '';
  };
  while (i < text.length) {
    const c = text[i] as string;
    if (/\s/.test(c)) {
      if (inWord) words.push(cur);
      cur = '';
      inWord = false;
      i++;
      continue;
    }
    inWord = true;
    if (c === '\\') {
      cur += text[i + 1] ?? '';
      i += 2;
    } else if (c === "'") {
      const close = text.indexOf("'", i + 1);
      if (close < 0)
        throw invalidParameter(`unexpected end of statement while looking for matching single-quote`);
      cur += text.slice(i + 1, close);
      i = close + 1;
    } else if (c === '"') {
      i++;
      for (;;) {
        if (i >= text.length)
          throw invalidParameter(`unexpected end of statement while looking for matching double-quote`);
        const d = text[i] as string;
        if (d === '"') {
          i++;
          break;
        }
        if (d === '\\' && (text[i + 1] === '"' || text[i + 1] === '\\' || text[i + 1] === '$')) {
          cur += text[i + 1];
          i += 2;
        } else if (d === '$') cur += expand();
        else {
          cur += d;
          i++;
        }
      }
    } else if (c === '$') cur += expand();
    else {
      cur += c;
      i++;
    }
  }
  if (inWord) words.push(cur);
  return words;
}

/** `KEY=VALUE ...` pairs, or the legacy `KEY value with spaces` form. */
function nameValues(instr: string, rest: string, env: string[] | null | undefined): Array<[string, string]> {
  const firstWord = rest.trim().split(/\s+/)[0] ?? '';
  if (!firstWord.includes('=')) {
    const m = /^(\S+)\s+([\s\S]*)$/.exec(rest.trim());
    if (!m) throw invalidParameter(`${instr} requires at least one argument`);
    const value = processWords(m[2] as string, env).join(' ');
    return [[m[1] as string, value]];
  }
  const out: Array<[string, string]> = [];
  for (const word of processWords(rest, env)) {
    const eq = word.indexOf('=');
    if (eq <= 0)
      throw invalidParameter(`Syntax error - can't find = in "${word}". Must be of the form: name=value`);
    out.push([word.slice(0, eq), word.slice(eq + 1)]);
  }
  if (out.length === 0) throw invalidParameter(`${instr} requires at least one argument`);
  return out;
}

const DURATION_UNITS: Record<string, number> = {
  ns: 1,
  us: 1e3,
  µs: 1e3,
  ms: 1e6,
  s: 1e9,
  m: 60e9,
  h: 3600e9,
};

/** Go's time.ParseDuration, in nanoseconds. */
export function parseGoDuration(s: string): number {
  if (s === '0') return 0;
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0;
  let pos = 0;
  let m: RegExpExecArray | null;
  for (;;) {
    re.lastIndex = pos;
    m = re.exec(s);
    if (!m) break;
    total += Number(m[1]) * (DURATION_UNITS[m[2] as string] ?? 0);
    pos = re.lastIndex;
  }
  if (pos !== s.length || s === '') throw invalidParameter(`time: invalid duration "${s}"`);
  return Math.round(total);
}

function parseHealthcheck(rest: string): HealthConfig {
  let text = rest.trim();
  const flags: Record<string, string> = {};
  for (;;) {
    const m = /^--([a-z-]+)=(\S*)\s*/.exec(text);
    if (!m) break;
    flags[m[1] as string] = m[2] as string;
    text = text.slice(m[0].length);
  }
  const word = /^(\S+)\s*([\s\S]*)$/.exec(text);
  const kind = (word?.[1] ?? '').toUpperCase();
  if (kind === 'NONE') {
    if ((word?.[2] ?? '').trim() !== '' || Object.keys(flags).length) {
      throw invalidParameter('HEALTHCHECK NONE takes no arguments');
    }
    return { Test: ['NONE'] };
  }
  if (kind !== 'CMD') throw invalidParameter(`Unknown type "${kind}" in HEALTHCHECK (try CMD)`);
  const args = word?.[2] ?? '';
  const exec = jsonForm(args);
  const hc: HealthConfig = { Test: exec ? ['CMD', ...exec] : ['CMD-SHELL', args.trim()] };
  const durations: Record<string, keyof HealthConfig> = {
    interval: 'Interval',
    timeout: 'Timeout',
    'start-period': 'StartPeriod',
    'start-interval': 'StartInterval',
  };
  for (const [flag, value] of Object.entries(flags)) {
    const field = durations[flag];
    if (field) {
      const ns = parseGoDuration(value);
      if (ns !== 0 && ns < 1e6) throw invalidParameter(`Interval "${flag}" cannot be less than 1ms`);
      (hc as Record<string, unknown>)[field] = ns;
    } else if (flag === 'retries') {
      if (!/^\d+$/.test(value)) throw invalidParameter(`invalid value for --retries: ${value}`);
      hc.Retries = Number(value);
    } else throw invalidParameter(`Unknown flag: ${flag}`);
  }
  return hc;
}

function exposedPorts(specs: string[]): string[] {
  const out: string[] = [];
  for (const spec of specs) {
    const m = /^(\d+)(?:-(\d+))?(?:\/(tcp|udp|sctp))?$/i.exec(spec);
    if (!m) throw invalidParameter(`Invalid containerPort: ${spec}`);
    const start = Number(m[1]);
    const end = m[2] !== undefined ? Number(m[2]) : start;
    const proto = (m[3] ?? 'tcp').toLowerCase();
    if (start < 1 || end > 65535 || end < start)
      throw invalidParameter(`Invalid range format for --expose specification: ${spec}`);
    for (let p = start; p <= end; p++) out.push(`${p}/${proto}`);
  }
  return out;
}

/** Apply Dockerfile-like changes to a copy of `base`. Errors are InvalidParameter with dockerd's wording. */
export function applyChanges(base: ContainerConfig, changes: string[]): ContainerConfig {
  const config: ContainerConfig = structuredClone(base);
  let cmdSet = false;
  for (const line of dockerfileLines(changes.join('\n'))) {
    const m = /^(\S+)\s*([\s\S]*)$/.exec(line);
    if (!m) continue;
    const keyword = (m[1] as string).toLowerCase();
    const rest = m[2] as string;
    if (!KNOWN.has(keyword))
      throw invalidParameter(
        `dockerfile parse error line 1: unknown instruction: ${(m[1] as string).toUpperCase()}`,
      );
    if (!ALLOWED.has(keyword)) throw invalidParameter(`${keyword} is not a valid change command`);
    switch (keyword) {
      case 'cmd': {
        config.Cmd = jsonForm(rest) ?? ['/bin/sh', '-c', rest];
        cmdSet = true;
        break;
      }
      case 'entrypoint': {
        const exec = jsonForm(rest);
        if (exec) config.Entrypoint = exec;
        else if (rest.trim() === '') config.Entrypoint = null;
        else config.Entrypoint = ['/bin/sh', '-c', rest];
        if (!cmdSet) config.Cmd = null;
        break;
      }
      case 'env': {
        const env = [...(config.Env ?? [])];
        for (const [k, v] of nameValues('ENV', rest, config.Env)) {
          const i = env.findIndex((e) => e === k || e.startsWith(`${k}=`));
          if (i >= 0) env[i] = `${k}=${v}`;
          else env.push(`${k}=${v}`);
        }
        config.Env = env;
        break;
      }
      case 'label': {
        const labels = { ...(config.Labels ?? {}) };
        for (const [k, v] of nameValues('LABEL', rest, config.Env)) labels[k] = v;
        config.Labels = labels;
        break;
      }
      case 'expose': {
        const words = processWords(rest, config.Env);
        if (words.length === 0) throw invalidParameter('EXPOSE requires at least one argument');
        const ports = { ...(config.ExposedPorts ?? {}) };
        for (const p of exposedPorts(words)) ports[p] = {};
        config.ExposedPorts = ports;
        break;
      }
      case 'user': {
        const words = processWords(rest, config.Env);
        if (words.length !== 1) throw invalidParameter('USER requires exactly one argument');
        config.User = words[0] as string;
        break;
      }
      case 'workdir': {
        const words = processWords(rest, config.Env);
        if (words.length !== 1) throw invalidParameter('WORKDIR requires exactly one argument');
        const dir = words[0] as string;
        config.WorkingDir = posix.isAbsolute(dir)
          ? posix.normalize(dir)
          : posix.join('/', config.WorkingDir || '/', dir);
        break;
      }
      case 'volume': {
        const list = jsonForm(rest) ?? processWords(rest, config.Env);
        if (list.length === 0) throw invalidParameter('VOLUME requires at least one argument');
        const vols = { ...(config.Volumes ?? {}) };
        for (const v of list) {
          if (v.trim() === '') throw invalidParameter('VOLUME specified can not be an empty string');
          vols[v.trim()] = {};
        }
        config.Volumes = vols;
        break;
      }
      case 'stopsignal': {
        const words = processWords(rest, config.Env);
        if (words.length !== 1) throw invalidParameter('STOPSIGNAL requires exactly one argument');
        parseSignal(words[0] as string);
        config.StopSignal = words[0] as string;
        break;
      }
      case 'onbuild': {
        const t = rest.trim();
        const trigger = (t.split(/\s+/)[0] ?? '').toUpperCase();
        if (trigger === '') throw invalidParameter('ONBUILD requires at least one argument');
        if (trigger === 'ONBUILD')
          throw invalidParameter("Chaining ONBUILD via `ONBUILD ONBUILD` isn't allowed");
        if (trigger === 'FROM' || trigger === 'MAINTAINER') {
          throw invalidParameter(`${trigger} isn't allowed as an ONBUILD trigger`);
        }
        config.OnBuild = [...(config.OnBuild ?? []), t];
        break;
      }
      case 'healthcheck': {
        config.Healthcheck = parseHealthcheck(rest);
        break;
      }
    }
  }
  return config;
}
