/** One `WWW-Authenticate` challenge: its scheme (lowercase) and parameters (keys lowercase). */
export interface Challenge {
  scheme: string;
  params: Record<string, string>;
}

/**
 * Parse `WWW-Authenticate` values (RFC 7235): `Bearer realm="https://x/token",service="x"`,
 * `Basic realm="r"`; several challenges may share one header, separated by commas.
 */
export function parseChallenges(values: string | string[] | undefined): Challenge[] {
  const list = values === undefined ? [] : Array.isArray(values) ? values : [values];
  const out: Challenge[] = [];
  for (const value of list) {
    let s = value;
    let current: Challenge | undefined;
    for (;;) {
      s = s.replace(/^[\s,]+/, '');
      if (!s) break;
      const token = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+)/.exec(s);
      if (!token) break;
      const name = token[1] as string;
      const rest = s.slice(name.length);
      const param = /^\s*=\s*/.exec(rest);
      if (param && current) {
        s = rest.slice(param[0].length);
        let v: string;
        if (s.startsWith('"')) {
          let i = 1;
          v = '';
          while (i < s.length && s[i] !== '"') {
            if (s[i] === '\\' && i + 1 < s.length) i++;
            v += s[i];
            i++;
          }
          s = s.slice(i + 1);
        } else {
          const m = /^[^,\s]*/.exec(s);
          v = m ? m[0] : '';
          s = s.slice(v.length);
        }
        current.params[name.toLowerCase()] = v;
      } else {
        current = { scheme: name.toLowerCase(), params: {} };
        out.push(current);
        s = rest;
      }
    }
  }
  return out;
}
