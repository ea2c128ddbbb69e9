/**
 * The glob patterns of `${V#pat}`, `${V%pat}` and `${V/pat/repl}` as buildkit's shell lexer reads
 * them (`*`, `?`, `[…]`, `\x`), matched in linear steps per start position (no backtracking
 * regular expression: a Dockerfile cannot stall the engine with a pattern).
 */

export class PatternError extends Error {}

type Token =
  | { kind: 'star' }
  | { kind: 'any' }
  | { kind: 'char'; ch: string }
  | { kind: 'class'; negate: boolean; singles: Set<string>; ranges: Array<[number, number]> };

/** A pattern cut into its tokens, as written: an escape pair, a bracket class, or one character. */
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

function classToken(text: string): Token {
  let body = Array.from(text.slice(1, -1));
  const negate = body[0] === '!' || body[0] === '^';
  if (negate) body = body.slice(1);
  const singles = new Set<string>();
  const ranges: Array<[number, number]> = [];
  for (let i = 0; i < body.length; i++) {
    const lo = body[i] as string;
    if (body[i + 1] === '-' && i + 2 < body.length) {
      const hi = body[i + 2] as string;
      const [a, b] = [lo.codePointAt(0) as number, hi.codePointAt(0) as number];
      if (a > b) throw new PatternError(`invalid character class range: ${lo}-${hi}`);
      ranges.push([a, b]);
      i += 2;
    } else singles.add(lo);
  }
  return { kind: 'class', negate, singles, ranges };
}

function compile(pattern: string): Token[] {
  return patternTokens(pattern).map((t): Token => {
    if (t === '*') return { kind: 'star' };
    if (t === '?') return { kind: 'any' };
    if (t.length > 1 && t.startsWith('\\')) return { kind: 'char', ch: t.slice(1) };
    if (t.length > 1 && t.startsWith('[')) return classToken(t);
    return { kind: 'char', ch: t };
  });
}

function matchesOne(tok: Token, ch: string): boolean {
  if (tok.kind === 'any') return true;
  if (tok.kind === 'char') return tok.ch === ch;
  if (tok.kind !== 'class') return false;
  const cp = ch.codePointAt(0) as number;
  const inside = tok.singles.has(ch) || tok.ranges.some(([a, b]) => cp >= a && cp <= b);
  return inside !== tok.negate;
}

/** Every end position where the pattern matches `chars` from `start` (ascending); linear per token. */
function matchEnds(tokens: Token[], chars: string[], start: number): number[] {
  const n = chars.length;
  let reach = new Array<boolean>(n + 1).fill(false);
  reach[start] = true;
  for (const tok of tokens) {
    const next = new Array<boolean>(n + 1).fill(false);
    if (tok.kind === 'star') {
      let on = false;
      for (let p = 0; p <= n; p++) {
        on ||= reach[p] as boolean;
        next[p] = on;
      }
    } else {
      for (let p = 0; p < n; p++) if (reach[p] && matchesOne(tok, chars[p] as string)) next[p + 1] = true;
    }
    reach = next;
  }
  const ends: number[] = [];
  reach.forEach((on, p) => {
    if (on) ends.push(p);
  });
  return ends;
}

/** For each start position, the furthest end of a match from there (-1: none), in one backward pass per token. */
function longestFrom(tokens: Token[], chars: string[]): number[] {
  const n = chars.length;
  let best = Array.from({ length: n + 1 }, (_, p) => p);
  for (let i = tokens.length - 1; i >= 0; i--) {
    const tok = tokens[i] as Token;
    const next = new Array<number>(n + 1).fill(-1);
    if (tok.kind === 'star') {
      let far = -1;
      for (let p = n; p >= 0; p--) {
        far = Math.max(far, best[p] as number);
        next[p] = far;
      }
    } else {
      for (let p = 0; p < n; p++) if (matchesOne(tok, chars[p] as string)) next[p] = best[p + 1] as number;
    }
    best = next;
  }
  return best;
}

/** `${V#pat}` / `${V##pat}`: the shortest / longest match of the pattern cut from the start. */
export function trimPrefix(pattern: string, value: string, greedy: boolean): string {
  const chars = Array.from(value);
  const ends = matchEnds(compile(pattern), chars, 0);
  if (ends.length === 0) return value;
  return chars.slice(greedy ? (ends[ends.length - 1] as number) : (ends[0] as number)).join('');
}

const reverse = (s: string): string => Array.from(s).reverse().join('');

/** `${V%pat}` / `${V%%pat}`: the same from the end (pattern and value reversed, as buildkit). */
export function trimSuffix(pattern: string, value: string, greedy: boolean): string {
  const reversed = patternTokens(pattern).reverse().join('');
  return reverse(trimPrefix(reversed, reverse(value), greedy));
}

/**
 * `${V/pat/repl}` (the first match) and `${V//pat/repl}` (every match): the leftmost, longest
 * match each time, with Go's ReplaceAllString rules for empty matches.
 */
export function replacePattern(value: string, pattern: string, replacement: string, all: boolean): string {
  const tokens = compile(pattern);
  const chars = Array.from(value);
  let out = '';
  let lastEnd = 0;
  let search = 0;
  const longest = longestFrom(tokens, chars);
  while (search <= chars.length) {
    let start = search;
    while (start <= chars.length && (longest[start] as number) < 0) start++;
    if (start > chars.length) break;
    const end = longest[start] as number;
    out += chars.slice(lastEnd, start).join('');
    if (end > lastEnd || start === 0) out += replacement;
    lastEnd = end;
    if (!all) break;
    search = Math.max(search + 1, end);
  }
  return out + chars.slice(lastEnd).join('');
}
