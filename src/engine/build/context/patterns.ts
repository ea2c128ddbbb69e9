import { posix } from 'node:path';
import { errorMessage, invalidParameter } from '../../../common/errors.js';
import { compileGoRegExp, type GoRegExp } from '../../../common/go-regexp.js';

/**
 * The two pattern languages of a build: Go's filepath.Match (COPY/ADD sources) and moby's
 * patternmatcher (`.dockerignore`, `--exclude`: `**`, exceptions with `!`, parent directories).
 */

const BAD_PATTERN = 'syntax error in pattern';

/** Whether a COPY source has wildcards (`*`, `?`, `[`; a `\` escapes the next character). */
export function hasWildcards(path: string): boolean {
  for (let i = 0; i < path.length; i++) {
    const ch = path[i];
    if (ch === '\\') i++;
    else if (ch === '*' || ch === '?' || ch === '[') return true;
  }
  return false;
}

/** One character of a class (`\` escapes); throws on a malformed class. */
function classChar(chunk: string[], at: number): [string, number] {
  let i = at;
  if (i >= chunk.length || chunk[i] === '-' || chunk[i] === ']') throw new Error(BAD_PATTERN);
  if (chunk[i] === '\\') {
    i++;
    if (i >= chunk.length) throw new Error(BAD_PATTERN);
  }
  const ch = chunk[i] as string;
  if (i + 1 >= chunk.length) throw new Error(BAD_PATTERN);
  return [ch, i + 1];
}

/** Go's matchChunk: the rest of `s` after `chunk` matched its start, or undefined. */
function matchChunk(chunk: string[], s: string[]): string[] | undefined {
  let failed = false;
  let i = 0;
  let rest = s;
  while (i < chunk.length) {
    if (!failed && rest.length === 0) failed = true;
    const c = chunk[i];
    if (c === '[') {
      let r = '';
      if (!failed) {
        r = rest[0] as string;
        rest = rest.slice(1);
      }
      i++;
      let negated = false;
      if (chunk[i] === '^') {
        negated = true;
        i++;
      }
      let match = false;
      let ranges = 0;
      for (;;) {
        if (chunk[i] === ']' && ranges > 0) {
          i++;
          break;
        }
        const [lo, next] = classChar(chunk, i);
        let hi = lo;
        i = next;
        if (chunk[i] === '-') [hi, i] = classChar(chunk, i + 1);
        if (
          (lo.codePointAt(0) ?? 0) <= (r.codePointAt(0) ?? -1) &&
          (r.codePointAt(0) ?? -1) <= (hi.codePointAt(0) ?? 0)
        )
          match = true;
        ranges++;
      }
      if (match === negated) failed = true;
    } else if (c === '?') {
      if (!failed) {
        if (rest[0] === '/') failed = true;
        rest = rest.slice(1);
      }
      i++;
    } else {
      if (c === '\\') {
        i++;
        if (i >= chunk.length) throw new Error(BAD_PATTERN);
      }
      if (!failed) {
        if (chunk[i] !== rest[0]) failed = true;
        rest = rest.slice(1);
      }
      i++;
    }
  }
  return failed ? undefined : rest;
}

/** Go's scanChunk: leading stars, then the chunk up to the next star outside a class. */
function scanChunk(pattern: string[]): { star: boolean; chunk: string[]; rest: string[] } {
  let p = 0;
  let star = false;
  while (pattern[p] === '*') {
    p++;
    star = true;
  }
  let inRange = false;
  let i = p;
  for (; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\') {
      if (i + 1 < pattern.length) i++;
    } else if (c === '[') inRange = true;
    else if (c === ']') inRange = false;
    else if (c === '*' && !inRange) break;
  }
  return { star, chunk: pattern.slice(p, i), rest: pattern.slice(i) };
}

/** Go's filepath.Match on Unix; a malformed pattern throws `syntax error in pattern`. */
export function filepathMatch(patternText: string, nameText: string): boolean {
  let pattern = Array.from(patternText);
  let name = Array.from(nameText);
  outer: while (pattern.length > 0) {
    const { star, chunk, rest } = scanChunk(pattern);
    pattern = rest;
    if (star && chunk.length === 0) return !name.includes('/');
    let err: unknown;
    let t: string[] | undefined;
    try {
      t = matchChunk(chunk, name);
    } catch (e) {
      err = e;
    }
    if (t !== undefined && (t.length === 0 || pattern.length > 0)) {
      name = t;
      continue;
    }
    if (err) throw err;
    if (star) {
      for (let i = 0; i < name.length && name[i] !== '/'; i++) {
        const u = matchChunk(chunk, name.slice(i + 1));
        if (u !== undefined) {
          if (pattern.length === 0 && u.length > 0) continue;
          name = u;
          continue outer;
        }
      }
    }
    while (pattern.length > 0) {
      const next = scanChunk(pattern);
      pattern = next.rest;
      matchChunk(next.chunk, []);
    }
    return false;
  }
  return name.length === 0;
}

/** A filepath.Match pattern checked for syntax (400 with Go's words otherwise). */
export function checkPattern(pattern: string): void {
  try {
    filepathMatch(pattern, '.');
  } catch (err) {
    throw invalidParameter(`${errorMessage(err)}: ${JSON.stringify(pattern)}`);
  }
}

/** Regexp characters that mean nothing to filepath.Match (moby's shouldEscape). */
const ESCAPED = new Set(['.', '+', '(', ')', '|', '{', '}', '$']);

/** A patternmatcher pattern as a Go regular expression (moby's Pattern.compile). */
function patternRegExp(pattern: string): string {
  const chars = Array.from(pattern);
  let re = '^';
  for (let i = 0; i < chars.length; i++) {
    const ch = chars[i] as string;
    if (ch === '*') {
      if (chars[i + 1] === '*') {
        i++;
        if (chars[i + 1] === '/') i++;
        re += i + 1 >= chars.length ? '.*' : '(.*/)?';
      } else re += '[^/]*';
    } else if (ch === '?') re += '[^/]';
    else if (ESCAPED.has(ch)) re += `\\${ch}`;
    else if (ch === '\\') {
      if (i + 1 < chars.length) {
        i++;
        re += `\\${chars[i]}`;
      } else re += '\\\\';
    } else re += ch;
  }
  return `${re}$`;
}

interface Compiled {
  exclusion: boolean;
  re: GoRegExp;
}

/**
 * moby's PatternMatcher (as the docker CLI applies `.dockerignore`): the last pattern that
 * matches a path, or one of its parent directories, decides; a `!` pattern takes the path back.
 */
export class PatternMatcher {
  private readonly patterns: Compiled[] = [];
  /** Whether any pattern is an exception (`!…`): then an ignored directory may keep some files. */
  readonly hasExclusions: boolean;

  constructor(patterns: string[]) {
    for (const raw of patterns) {
      let p = raw.trim();
      if (p === '') continue;
      let exclusion = false;
      if (p.startsWith('!')) {
        if (p.length === 1) throw invalidParameter('illegal exclusion pattern: "!"');
        exclusion = true;
        p = p.slice(1);
      }
      p = posix.normalize(p);
      if (p.length > 1) p = p.replace(/\/+$/, '');
      checkPattern(p);
      let re: GoRegExp;
      try {
        re = compileGoRegExp(patternRegExp(p));
      } catch (err) {
        throw invalidParameter(`invalid pattern ${JSON.stringify(raw)}: ${errorMessage(err)}`);
      }
      this.patterns.push({ exclusion, re });
    }
    this.hasExclusions = this.patterns.some((p) => p.exclusion);
  }

  get empty(): boolean {
    return this.patterns.length === 0;
  }

  /**
   * Whether `file` (a clean relative path) is excluded: the pattern matches it or one of its
   * parent directories (patternmatcher's MatchesOrParentMatches, what the docker CLI applies).
   */
  matches(file: string): boolean {
    let matched = false;
    const parent = posix.dirname(file);
    const parentDirs = parent.split('/');
    for (const p of this.patterns) {
      if (p.exclusion !== matched) continue;
      let match = p.re.test(file);
      if (!match && parent !== '.') {
        for (let i = 1; i <= parentDirs.length && !match; i++)
          match = p.re.test(parentDirs.slice(0, i).join('/'));
      }
      if (match) matched = !p.exclusion;
    }
    return matched;
  }
}

/**
 * The patterns of a `.dockerignore` (moby's ReadAll): a BOM dropped, `#` lines are comments,
 * blank lines skipped, each pattern trimmed and cleaned, a leading `/` dropped, `!` kept.
 */
export function parseIgnoreFile(text: string): string[] {
  const out: string[] = [];
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  for (const line of lines) {
    if (line.startsWith('#')) continue;
    let p = line.trim();
    if (p === '') continue;
    const invert = p.startsWith('!');
    if (invert) p = p.slice(1).trim();
    if (p.length > 0) {
      p = posix.normalize(p);
      if (p.length > 1) p = p.replace(/\/+$/, '');
      if (p.length > 1 && p.startsWith('/')) p = p.slice(1);
    }
    out.push(invert ? `!${p}` : p);
  }
  return out;
}
