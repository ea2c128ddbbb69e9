/**
 * A small flag parser: `--name value`, `--name=value`, boolean `--flag`, repeatable flags.
 * Unknown flags are errors, so a typo never silently falls back to a default.
 */
export interface FlagSpec {
  /** 'string' takes a value; 'bool' takes none; 'list' takes a value and may repeat. */
  kind: 'string' | 'bool' | 'list';
  help: string;
  /** A one-letter alias (`-b`), as dockerd has for some flags. */
  short?: string;
}

export interface Parsed {
  flags: Map<string, string | boolean | string[]>;
  positional: string[];
}

export class UsageError extends Error {}

export function parseArgs(argv: string[], spec: Record<string, FlagSpec>): Parsed {
  const flags = new Map<string, string | boolean | string[]>();
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--') {
      positional.push(...argv.slice(i + 1));
      break;
    }
    const shortFlag = /^-([a-zA-Z])(=.*)?$/.exec(arg);
    if (!arg.startsWith('--') && !shortFlag) {
      positional.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = shortFlag
      ? (Object.keys(spec).find((k) => spec[k]?.short === shortFlag[1]) ?? `-${shortFlag[1]}`)
      : arg.slice(2, eq < 0 ? undefined : eq);
    const s = spec[name];
    if (!s) throw new UsageError(`unknown flag ${shortFlag ? arg.slice(0, 2) : `--${name}`}`);
    if (s.kind === 'bool') {
      const v = eq < 0 ? 'true' : arg.slice(eq + 1);
      if (!['true', 'false', '1', '0'].includes(v)) throw new UsageError(`--${name} takes true or false`);
      flags.set(name, v === 'true' || v === '1');
      continue;
    }
    let value: string | undefined;
    if (eq >= 0) value = arg.slice(eq + 1);
    else {
      value = argv[i + 1];
      i++;
    }
    if (value === undefined) throw new UsageError(`--${name} needs a value`);
    if (s.kind === 'list') {
      const list = (flags.get(name) as string[] | undefined) ?? [];
      list.push(value);
      flags.set(name, list);
    } else flags.set(name, value);
  }
  return { flags, positional };
}

export function usage(command: string, spec: Record<string, FlagSpec>): string {
  const lines = [`Usage: berth ${command} [flags]`, '', 'Flags:'];
  for (const [name, s] of Object.entries(spec)) {
    lines.push(
      `  ${s.short ? `-${s.short}, ` : ''}--${name}${s.kind === 'bool' ? '' : ' value'}${s.kind === 'list' ? ' (repeatable)' : ''}\n      ${s.help}`,
    );
  }
  return lines.join('\n');
}

export function str(p: Parsed, name: string): string | undefined {
  const v = p.flags.get(name);
  return typeof v === 'string' ? v : undefined;
}

export function list(p: Parsed, name: string): string[] | undefined {
  const v = p.flags.get(name);
  return Array.isArray(v) ? v : undefined;
}

export function bool(p: Parsed, name: string): boolean {
  return p.flags.get(name) === true;
}

/** `90`, `90s`, `15m`, `2h`, `1d`, `500ms` → milliseconds. */
export function parseDuration(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim());
  if (!m) throw new UsageError(`invalid duration ${JSON.stringify(text)}: use e.g. 30s, 10m, 1h`);
  const n = Number(m[1]);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[
    (m[2] ?? 's') as 'ms' | 's' | 'm' | 'h' | 'd'
  ];
  return Math.round(n * unit);
}

/** Resolve when SIGTERM or SIGINT arrives. */
export function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (sig: NodeJS.Signals): void => {
      process.off('SIGTERM', on);
      process.off('SIGINT', on);
      resolve(sig);
    };
    process.on('SIGTERM', on);
    process.on('SIGINT', on);
  });
}
