/** The glob patterns of `${V#pat}`, `${V%pat}` and `${V/pat/repl}` as buildkit's shell lexer reads them: `*`, `?`, `[…]`, `\x`. */

/** A pattern cut into its tokens: an escape pair, a bracket class, or one character. */
export function patternTokens(pattern: string): string[] {
  const chars = Array.from(pattern);
  const tokens: string[] = [];
  for (let i = 0; i < chars.length; i++) {
    const ch = chars[i] as string;
    if (ch === '\\' && i + 1 < chars.length) {
      tokens.push(ch + chars[++i]);
    } else if (ch === '[') {
      let j = i + 1;
      if (chars[j] === '!' || chars[j] === '^') j++;
      if (chars[j] === ']') j++;
      while (j < chars.length && chars[j] !== ']') j++;
      if (j < chars.length) {
        tokens.push(chars.slice(i, j + 1).join(''));
        i = j;
      } else tokens.push(ch);
    } else tokens.push(ch);
  }
  return tokens;
}

const quoteMeta = (s: string): string => s.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&');

/** convertShellPatternToRegex: `*` is `.*` (greedy) or `.*?`; anchored patterns match at the start. */
export function shellPatternToRegex(pattern: string, greedy: boolean, anchored: boolean): RegExp {
  let out = anchored ? '^' : '';
  for (const tok of patternTokens(pattern)) {
    if (tok === '*') out += greedy ? '[^]*' : '[^]*?';
    else if (tok === '?') out += '[^]';
    else if (tok.length > 1 && tok.startsWith('\\')) out += quoteMeta(tok.slice(1));
    else if (tok.length > 1 && tok.startsWith('[')) {
      let body = tok.slice(1, -1);
      const negate = body.startsWith('!') || body.startsWith('^');
      if (negate) body = body.slice(1);
      out += `[${negate ? '^' : ''}${body.replace(/[\\\]]/g, '\\$&')}]`;
    } else out += quoteMeta(tok);
  }
  return new RegExp(out, 'u');
}

const reverse = (s: string): string => Array.from(s).reverse().join('');

/** `${V#pat}` / `${V##pat}`: the shortest / longest match of the pattern cut from the start. */
export function trimPrefix(pattern: string, value: string, greedy: boolean): string {
  const m = shellPatternToRegex(pattern, greedy, true).exec(value);
  return m ? value.slice(m[0].length) : value;
}

/** `${V%pat}` / `${V%%pat}`: the same from the end (pattern and value reversed). */
export function trimSuffix(pattern: string, value: string, greedy: boolean): string {
  const reversed = patternTokens(pattern).reverse().join('');
  return reverse(trimPrefix(reversed, reverse(value), greedy));
}

/** `${V/pat/repl}` (first match) and `${V//pat/repl}` (every match); the longest match each time. */
export function replacePattern(value: string, pattern: string, replacement: string, all: boolean): string {
  const re = shellPatternToRegex(pattern, true, false);
  if (!all) {
    const m = re.exec(value);
    return m ? value.slice(0, m.index) + replacement + value.slice(m.index + m[0].length) : value;
  }
  const g = new RegExp(re.source, 'gu');
  return value.replace(g, () => replacement);
}
