/** The build args every Dockerfile may use without declaring them (dockerd's builtinAllowedBuildArgs). */
export const PREDEFINED_ARGS = new Set([
  'HTTP_PROXY',
  'http_proxy',
  'HTTPS_PROXY',
  'https_proxy',
  'FTP_PROXY',
  'ftp_proxy',
  'NO_PROXY',
  'no_proxy',
  'ALL_PROXY',
  'all_proxy',
]);

const envKey = (e: string): string => {
  const i = e.indexOf('=');
  return i < 0 ? e : e.slice(0, i);
};

/**
 * A build's args as dockerd's BuildArgs: the values the client gave (`buildargs`), the meta ARGs
 * (before the first FROM), the ARGs each stage declared, and which were used (the rest get the
 * "were not consumed" warning).
 */
export class BuildArgs {
  private readonly used = new Set<string>();
  private readonly meta = new Map<string, string | undefined>();

  constructor(private readonly given: Map<string, string | null>) {}

  /** A value given by the client (a null value: the engine's environment, as dockerd). */
  private givenValue(name: string): string | undefined {
    if (!this.given.has(name)) return undefined;
    const v = this.given.get(name);
    return v === null || v === undefined ? process.env[name] : v;
  }

  /** A meta ARG (before FROM): its value is the client's, else its default. */
  declareMeta(name: string, defaultValue: string | undefined): void {
    this.used.add(name);
    this.meta.set(name, this.givenValue(name) ?? defaultValue);
  }

  /** Meta ARGs as `NAME=value` (to expand FROM). */
  metaEnv(): string[] {
    return [...this.meta].filter(([, v]) => v !== undefined).map(([k, v]) => `${k}=${v}`);
  }

  /**
   * An ARG in a stage: the client's value, else the default, else the meta ARG of the same name
   * (an `ARG NAME` without default inherits it).
   */
  declare(name: string, defaultValue: string | undefined): string | undefined {
    this.used.add(name);
    return this.givenValue(name) ?? defaultValue ?? this.meta.get(name);
  }

  /** Predefined args the client gave values for (allowed in every stage, not declared). */
  predefined(): Array<[string, string]> {
    const out: Array<[string, string]> = [];
    for (const name of this.given.keys()) {
      if (!PREDEFINED_ARGS.has(name)) continue;
      const v = this.givenValue(name);
      if (v !== undefined) out.push([name, v]);
    }
    return out;
  }

  /** Given args no ARG declared (sorted), predefined ones excepted. */
  unused(): string[] {
    return [...this.given.keys()].filter((k) => !this.used.has(k) && !PREDEFINED_ARGS.has(k)).sort();
  }
}

/**
 * A stage's ARGs in scope, in declaration order: as `NAME=value` lines the env does not
 * override (dockerd's FilterAllowed), for expansion and RUN's environment.
 */
export function allowedArgs(
  declared: Map<string, string | undefined>,
  predefined: Array<[string, string]>,
  env: string[],
): Array<[string, string]> {
  const envKeys = new Set(env.map(envKey));
  const out: Array<[string, string]> = [];
  const seen = new Set<string>();
  for (const [k, v] of declared) {
    seen.add(k);
    if (v !== undefined && !envKeys.has(k)) out.push([k, v]);
  }
  for (const [k, v] of predefined) if (!seen.has(k) && !envKeys.has(k)) out.push([k, v]);
  return out;
}

/** Set `NAME=value` in an env list (replacing the same name, else appended). */
export function setEnv(env: string[], name: string, value: string): string[] {
  const out = env.filter((e) => envKey(e) !== name);
  const i = env.findIndex((e) => envKey(e) === name);
  if (i >= 0) {
    const copy = [...env];
    copy[i] = `${name}=${value}`;
    return copy;
  }
  out.push(`${name}=${value}`);
  return out;
}
