export const defaultPathEnv = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * moby's ReplaceOrAppendEnvValues: overrides replace defaults with the same key, a bare `KEY`
 * (no `=`) removes it, the rest is appended.
 */
export function replaceOrAppendEnv(defaults: string[], overrides: readonly string[]): string[] {
  const env: (string | null)[] = [...defaults];
  const index = new Map<string, number>();
  env.forEach((e, i) => {
    const eq = e!.indexOf('=');
    index.set(eq < 0 ? e! : e!.slice(0, eq), i);
  });
  for (const value of overrides) {
    const eq = value.indexOf('=');
    if (eq < 0) {
      const i = index.get(value);
      if (i !== undefined) env[i] = null;
      continue;
    }
    const i = index.get(value.slice(0, eq));
    if (i !== undefined) env[i] = value;
    else env.push(value);
  }
  return env.filter((e): e is string => e !== null);
}

/** The container's environment as dockerd makes it: PATH, HOSTNAME, TERM (tty), then Config.Env. */
export function containerEnv(
  env: readonly string[] | null | undefined,
  hostname: string,
  tty: boolean,
): string[] {
  const defaults = [defaultPathEnv, `HOSTNAME=${hostname}`];
  if (tty) defaults.push('TERM=xterm');
  return replaceOrAppendEnv(defaults, env ?? []);
}
