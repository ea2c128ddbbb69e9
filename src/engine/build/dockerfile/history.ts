import type { HealthConfig } from '../../../common/docker-types.js';
import { invalidParameter } from '../../../common/errors.js';
import { cleanPath, goQuote } from '../../images/dockerfile/go-text.js';
import type { Instruction } from '../build.types.js';

/** The texts dockerd's classic builder writes for steps: `#(nop)` history of metadata steps, COPY/ADD's, RUN's with build args; the command lines CMD/ENTRYPOINT/RUN resolve to. */

export const DEFAULT_SHELL = ['/bin/sh', '-c'];

/** Go's `%q` of a []string: `["a b" "c"]`. */
export const quoteList = (list: readonly string[] | null): string =>
  `[${(list ?? []).map(goQuote).join(' ')}]`;

/** Go's `%v` of a []string: `[a b c]`. */
export const plainList = (list: readonly string[]): string => `[${list.join(' ')}]`;

/** strconv.QuoteRune */
export function quoteRune(n: number): string {
  const ch = String.fromCodePoint(n);
  if (ch === "'") return "'\\''";
  if (ch === '"') return `'"'`;
  return `'${goQuote(ch).slice(1, -1)}'`;
}

/** time.Duration's String(): `1m30s`, `100ms`, `0s`. */
export function goDuration(ns: number): string {
  if (ns === 0) return '0s';
  const neg = ns < 0;
  let u = Math.abs(ns);
  const sign = neg ? '-' : '';
  if (u < 1e9) {
    const [unit, div] = u < 1e3 ? ['ns', 1] : u < 1e6 ? ['µs', 1e3] : ['ms', 1e6];
    return `${sign}${trimFraction(u / (div as number))}${unit}`;
  }
  const h = Math.floor(u / 3.6e12);
  u -= h * 3.6e12;
  const m = Math.floor(u / 6e10);
  u -= m * 6e10;
  const s = trimFraction(u / 1e9);
  return `${sign}${h > 0 ? `${h}h${m}m` : m > 0 ? `${m}m` : ''}${s}s`;
}

const trimFraction = (n: number): string => {
  const s = n.toFixed(9);
  return s.replace(/\.?0+$/, '');
};

/** Go's `%q` of a *HealthConfig (dockerd 20.10: Test, Interval, Timeout, StartPeriod, Retries). */
export function healthText(h: HealthConfig): string {
  const d = (v: number | undefined): string => goQuote(goDuration(v ?? 0));
  return `&{${quoteList(h.Test ?? [])} ${d(h.Interval)} ${d(h.Timeout)} ${d(h.StartPeriod)} ${quoteRune(h.Retries ?? 0)}}`;
}

/**
 * The command CMD, ENTRYPOINT or RUN resolves to with the stage's shell (resolveCmdLine): the
 * shell form prepends the shell; an empty ENTRYPOINT is null (it clears the entrypoint).
 */
export function resolveCmdLine(
  instr: Extract<Instruction, { kind: 'cmd' | 'entrypoint' | 'run' }>,
  shell: readonly string[] = DEFAULT_SHELL,
): string[] | null {
  if (instr.kind === 'entrypoint' && instr.cmdLine.length === 0) return null;
  return instr.prependShell ? [...shell, ...instr.cmdLine] : [...instr.cmdLine];
}

/** dockerd's normalizeWorkdir: a relative WORKDIR joins the current one; the result is clean and absolute. */
export function resolveWorkdir(current: string, requested: string): string {
  if (requested === '') throw invalidParameter('cannot normalize nothing');
  return cleanPath(requested.startsWith('/') ? requested : `/${current}/${requested}`);
}

/** The comment of a metadata step (what follows `#(nop) `), from the expanded instruction. */
function comment(instr: Instruction, shell: readonly string[], workingDir: string): string | undefined {
  switch (instr.kind) {
    case 'env':
    case 'label':
      return [instr.kind.toUpperCase(), ...instr.pairs.map(([k, v]) => `${k}=${v}`)].join(' ');
    case 'arg':
      return `ARG ${instr.args.map((a) => (a.value === undefined ? a.name : `${a.name}=${a.value}`)).join(' ')}`;
    case 'maintainer':
      return `MAINTAINER ${instr.value}`;
    case 'expose':
      return `EXPOSE ${instr.ports.join(' ')}`;
    case 'user':
      return `USER ${instr.value}`;
    case 'stopsignal':
      return `STOPSIGNAL ${instr.value}`;
    case 'volume':
      return `VOLUME ${plainList(instr.volumes)}`;
    case 'shell':
      return `SHELL ${plainList(instr.shell)}`;
    case 'cmd':
      return `CMD ${quoteList(resolveCmdLine(instr, shell))}`;
    case 'entrypoint':
      return `ENTRYPOINT ${quoteList(resolveCmdLine(instr, shell))}`;
    case 'healthcheck':
      return `HEALTHCHECK ${healthText(instr.health)}`;
    case 'onbuild':
      return `ONBUILD ${instr.expression}`;
    case 'workdir':
      return `WORKDIR ${workingDir}`;
    default:
      return undefined;
  }
}

/**
 * The history `created_by` of a metadata step, as dockerd 20.10's classic builder writes it:
 * `/bin/sh -c #(nop)  ENV A=b` (two spaces), `/bin/sh -c #(nop) WORKDIR /x` (one). `instr` is the
 * expanded instruction; `shell` the stage's SHELL before the step (for SHELL itself: the new
 * one, as dockerd commits after setting it); `workingDir` the WorkingDir after a WORKDIR step.
 * RUN, COPY, ADD and FROM have no `#(nop)` text: undefined.
 */
export function nopHistory(
  instr: Instruction,
  state: { shell?: readonly string[]; workingDir?: string } = {},
): string | undefined {
  const shell = state.shell ?? DEFAULT_SHELL;
  const text = comment(instr, shell, state.workingDir ?? '');
  if (text === undefined) return undefined;
  const prefix = instr.kind === 'shell' ? instr.shell : shell;
  return instr.kind === 'workdir'
    ? [...prefix, `#(nop) ${text}`].join(' ')
    : [...prefix, '#(nop) ', text].join(' ');
}

/**
 * COPY/ADD's history: `/bin/sh -c #(nop) COPY file:<sha256> in /dst ` (with dockerd's trailing
 * space). `source` is the context helper's `file:<sum>` / `dir:<sum>` / `multi:<sum>` text,
 * `dest` the destination as written (expanded).
 */
export function copyHistory(
  kind: 'copy' | 'add',
  source: string,
  dest: string,
  shell: readonly string[] = DEFAULT_SHELL,
): string {
  return [...shell, `#(nop) ${kind.toUpperCase()} ${source} in ${dest} `].join(' ');
}

/**
 * RUN's command as dockerd keeps it for the cache and history: with build args in force
 * (`NAME=value`, not shadowed by ENV) it is prefixed by `|N` and them, sorted
 * (`|1 b=3 /bin/sh -c true` once joined by spaces).
 */
export function runHistoryCmd(cmd: readonly string[], buildArgEnv: readonly string[]): string[] {
  if (buildArgEnv.length === 0) return [...cmd];
  const sorted = [...buildArgEnv].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  return [`|${sorted.length}`, ...sorted, ...cmd];
}
