import { isIP } from 'node:net';
import type { ContainerConfig, HealthConfig } from '../../common/docker-types.js';
import { invalidParameter } from '../../common/errors.js';
import { parseSignal } from '../containers/signals.js';

/**
 * `changes` of import and commit: Dockerfile instructions applied to an image config, as
 * dockerd 20.10's BuildFromConfig does it. The steps and their order are dockerd's, and so
 * are the error texts (all InvalidParameter):
 *
 * 1. the changes are joined with newlines and parsed as a Dockerfile (buildkit's parser: parser
 *    directives, comments, line continuations, per-instruction argument parsers, JSON forms);
 * 2. every instruction must be one of CMD, ENTRYPOINT, ENV, EXPOSE, HEALTHCHECK, LABEL, ONBUILD,
 *    USER, VOLUME, WORKDIR (`<name> is not a valid change command`);
 * 3. every instruction is turned into a command (argument counts, builder flags);
 * 4. the commands are applied in order, each expanding variables (`$VAR`, `${VAR:-x}`, quotes)
 *    against the environment the config has at that point.
 *
 * No changes at all leave the config as it is; an empty change is a Dockerfile without
 * instructions, an error.
 */

const VALID_CHANGE_COMMANDS = new Set([
  'cmd',
  'entrypoint',
  'env',
  'expose',
  'healthcheck',
  'label',
  'onbuild',
  // not in dockerd 20.10; newer dockerd takes it (docker CLI 28 documents it for import and commit)
  'stopsignal',
  'user',
  'volume',
  'workdir',
]);

const DEFAULT_SHELL = ['/bin/sh', '-c'];

// ---- Go string semantics ----

/** unicode.IsSpace */
const SPACE_CLASS = '\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const SPACE_RE = new RegExp(`^[${SPACE_CLASS}]$`);
const LEADING_SPACE_RE = new RegExp(`^[${SPACE_CLASS}]+`);
const TRAILING_SPACE_RE = new RegExp(`[${SPACE_CLASS}]+$`);
/** The parser's reWhitespace. */
const WHITESPACE_RE = /[\t\v\f\r ]+/;

const isSpace = (ch: string | undefined): boolean => ch !== undefined && SPACE_RE.test(ch);
const trimLeftSpace = (s: string): string => s.replace(LEADING_SPACE_RE, '');
const trimSpace = (s: string): string => trimLeftSpace(s).replace(TRAILING_SPACE_RE, '');
const isLetter = (ch: string): boolean => /^\p{L}$/u.test(ch);
const isDigit = (ch: string): boolean => /^\p{Nd}$/u.test(ch);

/**
 * The UTF-8 bytes of `s` as a string of U+0000..U+00FF, for the parser steps that walk bytes.
 * Where such a step copies byte by byte it turns each byte into a rune, so non-ASCII text comes
 * out re-encoded ("µ" becomes "Âµ"); keeping the byte string reproduces that.
 */
const toBytes = (s: string): string => Buffer.from(s, 'utf8').toString('latin1');
const fromBytes = (b: string): string => Buffer.from(b, 'latin1').toString('utf8');

const PRINTABLE_RE = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u;
const hex = (n: number, width: number): string => n.toString(16).padStart(width, '0');

/** strconv.Quote (what `%q` and `%#v` print for a string). */
export function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0) as number;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (PRINTABLE_RE.test(ch)) out += ch;
    else if (ch === '\x07') out += '\\a';
    else if (ch === '\b') out += '\\b';
    else if (ch === '\f') out += '\\f';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\v') out += '\\v';
    else if (cp < 0x20 || cp === 0x7f) out += `\\x${hex(cp, 2)}`;
    else if (cp >= 0xd800 && cp <= 0xdfff) out += '\ufffd';
    else if (cp < 0x10000) out += `\\u${hex(cp, 4)}`;
    else out += `\\U${hex(cp, 8)}`;
  }
  return `${out}"`;
}

/** The time package's own quoting: every non-ASCII or control byte as \xNN. */
function timeQuote(s: string): string {
  let out = '"';
  for (const b of Buffer.from(s, 'utf8')) {
    if (b >= 0x80 || b < 0x20) out += `\\x${hex(b, 2)}`;
    else if (b === 0x22 || b === 0x5c) out += `\\${String.fromCharCode(b)}`;
    else out += String.fromCharCode(b);
  }
  return `${out}"`;
}

/** Go's path.Clean. */
function cleanPath(p: string): string {
  if (p === '') return '.';
  const rooted = p.startsWith('/');
  const out: string[] = [];
  for (const part of p.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (out.length > 0 && out[out.length - 1] !== '..') out.pop();
      else if (!rooted) out.push('..');
      continue;
    }
    out.push(part);
  }
  const s = out.join('/');
  return rooted ? `/${s}` : s || '.';
}

const DURATION_UNITS: Record<string, bigint> = {
  ns: 1n,
  us: 1000n,
  [toBytes('µs')]: 1000n, // U+00B5
  [toBytes('μs')]: 1000n, // U+03BC
  ms: 1000000n,
  s: 1000000000n,
  m: 60000000000n,
  h: 3600000000000n,
};
const MAX_DURATION = 1n << 63n;

/** Go's time.ParseDuration, in nanoseconds; errors are InvalidParameter with Go's text. */
export function parseGoDuration(orig: string): number {
  const invalid = () => invalidParameter(`time: invalid duration ${timeQuote(orig)}`);
  let s = toBytes(orig);
  let neg = false;
  if (s !== '' && (s[0] === '-' || s[0] === '+')) {
    neg = s[0] === '-';
    s = s.slice(1);
  }
  if (s === '0') return 0;
  if (s === '') throw invalid();
  const digit = (c: string | undefined): boolean => c !== undefined && c >= '0' && c <= '9';
  let d = 0n;
  while (s !== '') {
    if (!(s[0] === '.' || digit(s[0]))) throw invalid();
    // leadingInt
    let i = 0;
    let v = 0n;
    for (; i < s.length && digit(s[i]); i++) {
      if (v > MAX_DURATION / 10n) throw invalid();
      v = v * 10n + BigInt(s.charCodeAt(i) - 48);
      if (v > MAX_DURATION) throw invalid();
    }
    const pre = i > 0;
    s = s.slice(i);
    // leadingFraction
    let f = 0n;
    let scale = 1;
    let post = false;
    if (s !== '' && s[0] === '.') {
      s = s.slice(1);
      let j = 0;
      let overflow = false;
      for (; j < s.length && digit(s[j]); j++) {
        if (overflow) continue;
        if (f > (MAX_DURATION - 1n) / 10n) {
          overflow = true;
          continue;
        }
        const y = f * 10n + BigInt(s.charCodeAt(j) - 48);
        if (y > MAX_DURATION) {
          overflow = true;
          continue;
        }
        f = y;
        scale *= 10;
      }
      post = j > 0;
      s = s.slice(j);
    }
    if (!pre && !post) throw invalid();
    let u = 0;
    while (u < s.length && !(s[u] === '.' || digit(s[u]))) u++;
    if (u === 0) throw invalidParameter(`time: missing unit in duration ${timeQuote(orig)}`);
    const unitName = s.slice(0, u);
    s = s.slice(u);
    const unit = DURATION_UNITS[unitName];
    if (unit === undefined) {
      throw invalidParameter(
        `time: unknown unit ${timeQuote(fromBytes(unitName))} in duration ${timeQuote(orig)}`,
      );
    }
    if (v > MAX_DURATION / unit) throw invalid();
    v *= unit;
    if (f > 0n) {
      v += BigInt(Math.trunc(Number(f) * (Number(unit) / scale)));
      if (v > MAX_DURATION) throw invalid();
    }
    d += v;
    if (d > MAX_DURATION) throw invalid();
  }
  if (neg) return -Number(d);
  if (d > MAX_DURATION - 1n) throw invalid();
  return Number(d);
}

/** strconv.ParseInt(s, 10, bits). */
function parseGoInt(s: string, bits: number): number {
  const syntax = () => invalidParameter(`strconv.ParseInt: parsing ${goQuote(s)}: invalid syntax`);
  const range = () => invalidParameter(`strconv.ParseInt: parsing ${goQuote(s)}: value out of range`);
  let digits = s;
  let neg = false;
  if (digits[0] === '+' || digits[0] === '-') {
    neg = digits[0] === '-';
    digits = digits.slice(1);
  }
  if (digits === '') throw syntax();
  const maxUnsigned = 2 ** bits - 1;
  let n = 0;
  for (const c of digits) {
    if (c < '0' || c > '9') throw syntax();
    n = n * 10 + (c.charCodeAt(0) - 48);
    if (n > maxUnsigned) throw range();
  }
  const cutoff = 2 ** (bits - 1);
  if ((!neg && n >= cutoff) || (neg && n > cutoff)) throw range();
  return neg ? -n : n;
}

// ---- shell lexer (buildkit frontend/dockerfile/shell) ----

class LexError extends Error {}

class Words {
  private word = '';
  private words: string[] = [];
  private inWord = false;

  addChar(ch: string): void {
    if (isSpace(ch) && this.inWord) {
      if (this.word.length !== 0) {
        this.words.push(this.word);
        this.word = '';
        this.inWord = false;
      }
    } else if (!isSpace(ch)) this.addRawChar(ch);
  }

  addRawChar(ch: string): void {
    this.word += ch;
    this.inWord = true;
  }

  addString(s: string): void {
    for (const ch of s) this.addChar(ch);
  }

  addRawString(s: string): void {
    this.word += s;
    this.inWord = true;
  }

  get(): string[] {
    if (this.word.length > 0) {
      this.words.push(this.word);
      this.word = '';
      this.inWord = false;
    }
    return this.words;
  }
}

class ShellWord {
  private readonly chars: string[];
  private pos = 0;

  constructor(
    source: string,
    private readonly envs: Map<string, string>,
    private readonly escapeToken: string,
  ) {
    this.chars = Array.from(source);
  }

  private peek(): string | undefined {
    return this.chars[this.pos];
  }

  private next(): string | undefined {
    const ch = this.chars[this.pos];
    if (ch !== undefined) this.pos++;
    return ch;
  }

  processStopOn(stop: string | undefined): { word: string; words: string[] } {
    let result = '';
    const words = new Words();
    for (;;) {
      const ch = this.peek();
      if (ch === undefined) break;
      if (stop !== undefined && ch === stop) {
        this.next();
        return { word: result, words: words.get() };
      }
      if (ch === "'" || ch === '"' || ch === '$') {
        const tmp = ch === "'" ? this.singleQuote() : ch === '"' ? this.doubleQuote() : this.dollar();
        result += tmp;
        if (ch === '$') words.addString(tmp);
        else words.addRawString(tmp);
        continue;
      }
      let c = this.next() as string;
      if (c === this.escapeToken) {
        const escaped = this.next();
        if (escaped === undefined) break;
        c = escaped;
        words.addRawChar(c);
      } else words.addChar(c);
      result += c;
    }
    if (stop !== undefined)
      throw new LexError(`unexpected end of statement while looking for matching ${stop}`);
    return { word: result, words: words.get() };
  }

  private singleQuote(): string {
    this.next();
    let result = '';
    for (;;) {
      const ch = this.next();
      if (ch === undefined)
        throw new LexError('unexpected end of statement while looking for matching single-quote');
      if (ch === "'") return result;
      result += ch;
    }
  }

  private doubleQuote(): string {
    this.next();
    let result = '';
    for (;;) {
      const peek = this.peek();
      if (peek === undefined)
        throw new LexError('unexpected end of statement while looking for matching double-quote');
      if (peek === '"') {
        this.next();
        return result;
      }
      if (peek === '$') {
        result += this.dollar();
        continue;
      }
      let ch = this.next() as string;
      if (ch === this.escapeToken) {
        const after = this.peek();
        if (after === undefined) continue;
        if (after === '"' || after === '$' || after === this.escapeToken) ch = this.next() as string;
      }
      result += ch;
    }
  }

  /** The word up to the closing brace of `${name?word}` / `${name:Xword}`. */
  private braceWord(): string {
    try {
      return this.processStopOn('}').word;
    } catch (err) {
      if (this.peek() === undefined) throw new LexError("syntax error: missing '}'");
      throw err;
    }
  }

  private dollar(): string {
    this.next();
    if (this.peek() !== '{') {
      const name = this.processName();
      if (name === '') return '$';
      return this.envs.get(name) ?? '';
    }
    this.next();
    const first = this.peek();
    if (first === undefined) throw new LexError("syntax error: missing '}'");
    if (first === '{' || first === '}' || first === ':') throw new LexError('syntax error: bad substitution');
    const name = this.processName();
    const ch = this.next();
    const value = this.envs.get(name);
    if (ch === '}') return value ?? '';
    if (ch === '?') {
      const word = this.braceWord();
      if (value === undefined) throw new LexError(`${name}: ${word || 'is not allowed to be unset'}`);
      return value;
    }
    if (ch === ':') {
      const modifier = this.next();
      const word = this.braceWord();
      const current = value ?? '';
      switch (modifier) {
        case '+':
          return current !== '' ? word : current;
        case '-':
          return current === '' ? word : current;
        case '?':
          if (value === undefined) throw new LexError(`${name}: ${word || 'is not allowed to be unset'}`);
          if (value === '') throw new LexError(`${name}: ${word || 'is not allowed to be empty'}`);
          return value;
        default:
          throw new LexError(`unsupported modifier (${modifier ?? '\ufffd'}) in substitution`);
      }
    }
    throw new LexError("missing ':' in substitution");
  }

  private processName(): string {
    let name = '';
    for (;;) {
      const ch = this.peek();
      if (ch === undefined) break;
      if (name === '' && isDigit(ch)) {
        for (let d = this.peek(); d !== undefined && isDigit(d); d = this.peek()) name += this.next();
        return name;
      }
      if (name === '' && '@*#?-$!0'.includes(ch)) {
        this.next();
        return ch;
      }
      if (!isLetter(ch) && !isDigit(ch) && ch !== '_') break;
      name += this.next();
    }
    return name;
  }
}

function buildEnvs(env: string[] | null | undefined): Map<string, string> {
  const envs = new Map<string, string>();
  for (const e of env ?? []) {
    const i = e.indexOf('=');
    if (i < 0) envs.set(e, '');
    else envs.set(e.slice(0, i), e.slice(i + 1));
  }
  return envs;
}

function lex(word: string, env: string[] | null | undefined, escapeToken: string) {
  try {
    return new ShellWord(word, buildEnvs(env), escapeToken).processStopOn(undefined);
  } catch (err) {
    if (err instanceof LexError) throw invalidParameter(`failed to process ${goQuote(word)}: ${err.message}`);
    throw err;
  }
}

/** The lexer's ProcessWord: quotes, escapes and variables resolved, spacing kept. */
export function processWord(word: string, env: string[] | null | undefined, escapeToken = '\\'): string {
  return lex(word, env, escapeToken).word;
}

/** The lexer's ProcessWords: as processWord, then split into words (quoted parts stay whole). */
export function processWords(word: string, env: string[] | null | undefined, escapeToken = '\\'): string[] {
  return lex(word, env, escapeToken).words;
}

// ---- parser (buildkit frontend/dockerfile/parser) ----

/** One instruction: its lower-case name, the whole line, builder flags and parsed arguments. */
export interface DockerfileNode {
  value: string;
  original: string;
  flags: string[];
  args: string[];
  json: boolean;
}

interface Directives {
  escapeToken: string;
  continuation: RegExp;
  done: boolean;
  seen: Set<string>;
}

interface LineArgs {
  args: string[];
  json: boolean;
}

const MAX_LINE_BYTES = 64 * 1024;
const DIRECTIVE_RE = /^#[\t\n\f\r ]*([a-zA-Z][a-zA-Z0-9]*)[\t\n\f\r ]*=[\t\n\f\r ]*([^\n]+?)[\t\n\f\r ]*$/;
const NOT_STRING_ARRAY = 'when using JSON array syntax, arrays must be comprised of strings only';

function setEscapeToken(d: Directives, token: string): void {
  if (token !== '`' && token !== '\\') {
    throw invalidParameter(`invalid escape token '${token}' does not match \` or \\`);
  }
  d.escapeToken = token;
  const e = token === '\\' ? '\\\\' : '`';
  d.continuation = new RegExp(`([^${e}])${e}[ \\t]*$|^${e}[ \\t]*$`);
}

function possibleParserDirective(d: Directives, line: string): void {
  if (d.done) return;
  const m = DIRECTIVE_RE.exec(line);
  const key = m?.[1]?.toLowerCase();
  if (!m || (key !== 'escape' && key !== 'syntax')) {
    d.done = true;
    return;
  }
  if (d.seen.has(key)) throw invalidParameter(`only one ${key} parser directive can be used`);
  d.seen.add(key);
  if (key === 'escape') setEscapeToken(d, m[2] as string);
}

const isComment = (line: string): boolean => trimLeftSpace(line).startsWith('#');

function processLine(d: Directives, line: string, stripLeft: boolean): string {
  const token = stripLeft ? trimLeftSpace(line) : line;
  possibleParserDirective(d, token);
  return token.startsWith('#') ? '' : token;
}

function trimContinuation(line: string, d: Directives): [string, boolean] {
  if (d.continuation.test(line)) return [line.replace(d.continuation, '$1'), false];
  return [line, true];
}

/** Builder flags (`--name=value`) at the start of the arguments, walked byte by byte. */
function extractBuilderFlags(line: string): [string, string[]] {
  const b = toBytes(line);
  const words: string[] = [];
  let phase: 'spaces' | 'word' | 'quote' = 'spaces';
  let word = '';
  let quote = '';
  let blankOK = false;
  let ch = '';
  for (let pos = 0; pos <= b.length; pos++) {
    if (pos !== b.length) ch = b[pos] as string;
    if (phase === 'spaces') {
      if (pos === b.length) break;
      if (isSpace(ch)) continue;
      if (ch !== '-' || pos + 1 === b.length || b[pos + 1] !== '-') return [fromBytes(b.slice(pos)), words];
      phase = 'word';
    }
    if (pos === b.length) {
      if (word !== '--' && (blankOK || word.length > 0)) words.push(word);
      break;
    }
    if (phase === 'word') {
      if (isSpace(ch)) {
        phase = 'spaces';
        if (word === '--') return [fromBytes(b.slice(pos)), words];
        if (blankOK || word.length > 0) words.push(word);
        word = '';
        blankOK = false;
        continue;
      }
      if (ch === "'" || ch === '"') {
        quote = ch;
        blankOK = true;
        phase = 'quote';
        continue;
      }
      if (ch === '\\') {
        if (pos + 1 === b.length) continue;
        pos++;
        ch = b[pos] as string;
      }
      word += ch;
      continue;
    }
    if (ch === quote) {
      phase = 'word';
      continue;
    }
    if (ch === '\\') {
      if (pos + 1 === b.length) {
        phase = 'word';
        continue;
      }
      pos++;
      ch = b[pos] as string;
    }
    word += ch;
  }
  return ['', words];
}

function splitCommand(line: string): { cmd: string; flags: string[]; rest: string } {
  const t = trimSpace(line);
  const m = WHITESPACE_RE.exec(t);
  const cmd = (m ? t.slice(0, m.index) : t).toLowerCase();
  if (!m) return { cmd, flags: [], rest: '' };
  const [rest, flags] = extractBuilderFlags(t.slice(m.index + m[0].length));
  return { cmd, flags, rest: trimSpace(rest) };
}

/** Words of a statement, quotes and escapes kept (they are resolved when expanding). */
function parseWords(rest: string, escapeToken: string): string[] {
  const chars = Array.from(rest);
  const n = chars.length;
  const words: string[] = [];
  let phase: 'spaces' | 'word' | 'quote' = 'spaces';
  let word = '';
  let quote = '';
  let blankOK = false;
  let ch = '';
  for (let pos = 0; pos <= n; pos++) {
    if (pos !== n) ch = chars[pos] as string;
    if (phase === 'spaces') {
      if (pos === n) break;
      if (isSpace(ch)) continue;
      phase = 'word';
    }
    if (pos === n) {
      if (blankOK || word.length > 0) words.push(word);
      break;
    }
    if (phase === 'word') {
      if (isSpace(ch)) {
        phase = 'spaces';
        if (blankOK || word.length > 0) words.push(word);
        word = '';
        blankOK = false;
        continue;
      }
      if (ch === "'" || ch === '"') {
        quote = ch;
        blankOK = true;
        phase = 'quote';
      }
      if (ch === escapeToken) {
        if (pos + 1 === n) continue;
        word += ch;
        pos++;
        ch = chars[pos] as string;
      }
      word += ch;
      continue;
    }
    if (ch === quote) phase = 'word';
    if (ch === escapeToken && quote !== "'") {
      if (pos + 1 === n) {
        phase = 'word';
        continue;
      }
      pos++;
      word += ch;
      ch = chars[pos] as string;
    }
    word += ch;
  }
  return words;
}

/** Replaces lone surrogates, as Go's JSON decoder does. */
const wellFormed = (s: string): string =>
  s.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\ufffd');

/** End of the first JSON value of `t` (which starts with `[`), or -1. Later text is ignored. */
function jsonValueEnd(t: string): number {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < t.length; i++) {
    const c = t[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '[' || c === '{') depth++;
    else if (c === ']' || c === '}') {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}

/** The exec (JSON array) form, undefined when the text is not one; non-strings are an error. */
export function jsonForm(rest: string): string[] | undefined {
  const t = trimLeftSpace(rest);
  if (!t.startsWith('[')) return undefined;
  const end = jsonValueEnd(t);
  if (end < 0) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(t.slice(0, end));
  } catch {
    return undefined;
  }
  if (!Array.isArray(value)) return undefined;
  if (!value.every((v) => typeof v === 'string')) throw invalidParameter(NOT_STRING_ARRAY);
  return (value as string[]).map(wellFormed);
}

function parseMaybeJSON(rest: string): LineArgs {
  if (rest === '') return { args: [], json: false };
  const exec = jsonForm(rest);
  return exec ? { args: exec, json: true } : { args: [rest], json: false };
}

function parseStringsWhitespaceDelimited(rest: string): LineArgs {
  return { args: rest === '' ? [] : rest.split(WHITESPACE_RE), json: false };
}

function parseMaybeJSONToList(rest: string): LineArgs {
  const exec = jsonForm(rest);
  return exec ? { args: exec, json: true } : parseStringsWhitespaceDelimited(rest);
}

function parseString(rest: string): LineArgs {
  return { args: rest === '' ? [] : [rest], json: false };
}

/** ENV and LABEL: `name=value ...`, or the old `name value with spaces`. Pairs, flattened. */
function parseNameVal(rest: string, key: string, d: Directives): LineArgs {
  const words = parseWords(rest, d.escapeToken);
  if (words.length === 0) return { args: [], json: false };
  if (!(words[0] as string).includes('=')) {
    const m = WHITESPACE_RE.exec(rest);
    if (!m) throw invalidParameter(`${key} must have two arguments`);
    return { args: [rest.slice(0, m.index), rest.slice(m.index + m[0].length)], json: false };
  }
  const args: string[] = [];
  for (const word of words) {
    const eq = word.indexOf('=');
    if (eq < 0) {
      throw invalidParameter(
        `Syntax error - can't find = in ${goQuote(word)}. Must be of the form: name=value`,
      );
    }
    args.push(word.slice(0, eq), word.slice(eq + 1));
  }
  return { args, json: false };
}

/** HEALTHCHECK: the type, then the command as CMD takes it. */
function parseHealthConfig(rest: string): LineArgs {
  const b = toBytes(rest);
  let sep = 0;
  while (sep < b.length && !isSpace(b[sep])) sep++;
  let next = sep;
  while (next < b.length && isSpace(b[next])) next++;
  if (sep === 0) return { args: [], json: false };
  const cmd = parseMaybeJSON(fromBytes(b.slice(next)));
  return { args: [fromBytes(b.slice(0, sep)), ...cmd.args], json: cmd.json };
}

const LINE_PARSERS: Record<string, (rest: string, d: Directives) => LineArgs> = {
  add: parseMaybeJSONToList,
  arg: (rest, d) => ({ args: parseWords(rest, d.escapeToken), json: false }),
  cmd: parseMaybeJSON,
  copy: parseMaybeJSONToList,
  entrypoint: parseMaybeJSON,
  env: (rest, d) => parseNameVal(rest, 'ENV', d),
  expose: parseStringsWhitespaceDelimited,
  from: parseStringsWhitespaceDelimited,
  healthcheck: parseHealthConfig,
  label: (rest, d) => parseNameVal(rest, 'LABEL', d),
  maintainer: parseString,
  onbuild: (rest, d) => {
    if (rest === '') return { args: [], json: false };
    const child = newNodeFromLine(rest, d);
    return { args: [child.value, ...child.args], json: false };
  },
  run: parseMaybeJSON,
  shell: parseMaybeJSON,
  stopsignal: parseString,
  user: parseString,
  volume: parseMaybeJSONToList,
  workdir: parseString,
};

function newNodeFromLine(line: string, d: Directives): DockerfileNode {
  const { cmd, flags, rest } = splitCommand(line);
  const parse = Object.hasOwn(LINE_PARSERS, cmd) ? LINE_PARSERS[cmd] : undefined;
  // Unknown instructions parse, with an empty argument; they are refused later.
  const { args, json } = parse ? parse(rest, d) : { args: [''], json: false };
  return { value: cmd, original: line, flags, args, json };
}

/** Parse a Dockerfile into its instructions and escape token, as buildkit's parser.Parse does. */
export function parseDockerfile(text: string): { nodes: DockerfileNode[]; escapeToken: string } {
  const d: Directives = { escapeToken: '\\', continuation: /$^/, done: false, seen: new Set() };
  setEscapeToken(d, '\\');
  // bufio.Scanner: lines without their newline and one trailing CR; a line of 64KiB or more
  // stops the scan.
  const raw = text === '' ? [] : text.split('\n');
  if (text.endsWith('\n')) raw.pop();
  let tooLong = false;
  const lines: string[] = [];
  for (const l of raw) {
    if (Buffer.byteLength(l, 'utf8') >= MAX_LINE_BYTES) {
      tooLong = true;
      break;
    }
    lines.push(l.endsWith('\r') ? l.slice(0, -1) : l);
  }
  const nodes: DockerfileNode[] = [];
  let i = 0;
  while (i < lines.length) {
    let first = lines[i] as string;
    if (i === 0 && first.startsWith('\ufeff')) first = first.slice(1);
    const processed = processLine(d, first, true);
    i++;
    let [line, endOfLine] = trimContinuation(processed, d);
    if (endOfLine && line === '') continue;
    while (!endOfLine && i < lines.length) {
      const next = lines[i] as string;
      const cont = processLine(d, next, false);
      i++;
      if (isComment(next)) continue;
      if (trimLeftSpace(cont) === '') continue;
      let part: string;
      [part, endOfLine] = trimContinuation(cont, d);
      line += part;
    }
    nodes.push(newNodeFromLine(line, d));
  }
  if (nodes.length === 0) throw invalidParameter('file with no instructions');
  if (tooLong)
    throw invalidParameter(`dockerfile line greater than max allowed size of ${MAX_LINE_BYTES - 1}`);
  return { nodes, escapeToken: d.escapeToken };
}

// ---- instructions (buildkit frontend/dockerfile/instructions) ----

/** Builder flags of one instruction (BFlags). */
class BuilderFlags {
  private readonly defined = new Map<string, { value: string }>();
  private readonly used = new Set<string>();

  constructor(private readonly args: string[]) {}

  addString(name: string): { value: string } {
    const flag = { value: '' };
    this.defined.set(name, flag);
    return flag;
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
      if (this.used.has(name)) throw invalidParameter(`Duplicate flag specified: ${name}`);
      this.used.add(name);
      if (eq < 0) throw invalidParameter(`Missing a value on flag: ${name}`);
      flag.value = value;
    }
  }
}

type Command =
  | { kind: 'env' | 'label'; pairs: Array<[string, string]> }
  | { kind: 'cmd' | 'entrypoint'; cmdLine: string[] | null; prependShell: boolean }
  | { kind: 'expose'; ports: string[] }
  | { kind: 'user' | 'workdir' | 'stopsignal'; value: string }
  | { kind: 'volume'; volumes: string[] }
  | { kind: 'onbuild'; expression: string }
  | { kind: 'healthcheck'; health: HealthConfig };

function parseKvps(args: string[], name: string): Array<[string, string]> {
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
function shellDependentCmdLine(node: DockerfileNode, emptyAsNil: boolean) {
  const args = node.args.length === 0 ? [] : node.json ? node.args : [node.args.join(' ')];
  return { cmdLine: emptyAsNil && args.length === 0 ? null : args, prependShell: !node.json };
}

/** A flag duration; unset is 0, less than 1ms (0 included) an error. */
function parseOptInterval(name: string, value: string): number {
  if (value === '') return 0;
  const ns = parseGoDuration(value);
  if (ns < 1e6) throw invalidParameter(`Interval ${goQuote(name)} cannot be less than 1ms`);
  return ns;
}

function parseHealthcheck(node: DockerfileNode): HealthConfig {
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
  const durations: Array<[keyof HealthConfig, string, string]> = [
    ['Interval', 'interval', interval.value],
    ['Timeout', 'timeout', timeout.value],
    ['StartPeriod', 'start-period', startPeriod.value],
  ];
  for (const [field, name, value] of durations) {
    const ns = parseOptInterval(name, value);
    if (ns !== 0) (health as Record<string, unknown>)[field] = ns;
  }
  if (retries.value !== '') {
    const n = parseGoInt(retries.value, 32);
    if (n < 1) throw invalidParameter(`--retries must be at least 1 (not ${n})`);
    health.Retries = n;
  }
  return health;
}

/** Byte-wise order, as Go's sort.Strings. */
const byteOrder = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));

function parseCommand(node: DockerfileNode): Command {
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

// ---- EXPOSE port specs (go-connections/nat) ----

/** strconv.ParseUint(s, 10, 16). */
function parsePortNumber(s: string): number | undefined {
  if (!/^[0-9]+$/.test(s)) return undefined;
  const n = Number(s);
  return n <= 65535 ? n : undefined;
}

function parsePortRange(ports: string): [number, number] | undefined {
  if (ports === '') return undefined;
  if (!ports.includes('-')) {
    const n = parsePortNumber(ports);
    return n === undefined ? undefined : [n, n];
  }
  const parts = ports.split('-');
  const start = parsePortNumber(parts[0] as string);
  const end = parsePortNumber(parts[1] as string);
  if (start === undefined || end === undefined || end < start) return undefined;
  return [start, end];
}

/** net.SplitHostPort's host, or its error text. */
function splitHost(hostport: string): { host: string } | { error: string } {
  const fail = (why: string) => ({ error: `address ${hostport}: ${why}` });
  const i = hostport.lastIndexOf(':');
  if (i < 0) return fail('missing port in address');
  let host: string;
  let j = 0;
  let k = 0;
  if (hostport[0] === '[') {
    const end = hostport.indexOf(']');
    if (end < 0) return fail("missing ']' in address");
    if (end + 1 === hostport.length) return fail('missing port in address');
    if (end + 1 !== i) {
      return fail(hostport[end + 1] === ':' ? 'too many colons in address' : 'missing port in address');
    }
    host = hostport.slice(1, end);
    j = 1;
    k = end + 1;
  } else {
    host = hostport.slice(0, i);
    if (host.includes(':')) return fail('too many colons in address');
  }
  if (hostport.slice(j).includes('[')) return fail("unexpected '[' in address");
  if (hostport.slice(k).includes(']')) return fail("unexpected ']' in address");
  return { host };
}

/** nat.ParsePortSpec, the exposed ports only. */
function parsePortSpec(raw: string): string[] {
  const parts = raw.split(':');
  const n = parts.length;
  let containerPort = parts[n - 1] as string;
  const hostPort = n >= 2 ? (parts[n - 2] as string) : '';
  const rawIP = n >= 3 ? parts.slice(0, n - 2).join(':') : '';
  let proto = '';
  const pp = containerPort.split('/');
  if (containerPort === '' || pp[0] === '') containerPort = '';
  else if (pp.length === 1) proto = 'tcp';
  else {
    proto = pp[1] === '' ? 'tcp' : (pp[1] as string);
    containerPort = pp[0] as string;
  }
  const split = splitHost(`${rawIP}:`);
  if ('error' in split) throw invalidParameter(`Invalid ip address ${rawIP}: ${split.error}`);
  const ip = split.host;
  if (ip !== '' && (ip.includes('%') || isIP(ip) === 0)) throw invalidParameter(`Invalid ip address: ${ip}`);
  if (containerPort === '') throw invalidParameter(`No port specified: ${raw}<empty>`);
  const range = parsePortRange(containerPort);
  if (!range) throw invalidParameter(`Invalid containerPort: ${containerPort}`);
  const [start, end] = range;
  if (hostPort !== '') {
    const hostRange = parsePortRange(hostPort);
    if (!hostRange) throw invalidParameter(`Invalid hostPort: ${hostPort}`);
    if (end - start !== hostRange[1] - hostRange[0] && end !== start) {
      throw invalidParameter(
        `Invalid ranges specified for container and host Ports: ${containerPort} and ${hostPort}`,
      );
    }
  }
  const lower = proto.toLowerCase();
  if (lower !== 'tcp' && lower !== 'udp' && lower !== 'sctp')
    throw invalidParameter(`Invalid proto: ${proto}`);
  const out: string[] = [];
  for (let p = start; p <= end; p++) out.push(`${p}/${lower}`);
  return out;
}

// ---- dispatch (moby builder/dockerfile dispatchers) ----

/** Apply Dockerfile-like changes to a copy of `base`. Errors are InvalidParameter with dockerd's wording. */
export function applyChanges(base: ContainerConfig, changes: string[]): ContainerConfig {
  const config: ContainerConfig = structuredClone(base);
  if (changes.length === 0) return config;
  const { nodes, escapeToken } = parseDockerfile(changes.join('\n'));
  for (const node of nodes) {
    if (!VALID_CHANGE_COMMANDS.has(node.value)) {
      throw invalidParameter(`${node.value} is not a valid change command`);
    }
  }
  const commands = nodes.map(parseCommand);
  let cmdSet = false;
  for (const command of commands) {
    const env = config.Env;
    const expand = (word: string) => processWord(word, env, escapeToken);
    switch (command.kind) {
      case 'env': {
        const list = [...(config.Env ?? [])];
        const index = new Map<string, number>();
        list.forEach((e, i) => {
          const eq = e.indexOf('=');
          const key = eq < 0 ? e : e.slice(0, eq);
          if (!index.has(key)) index.set(key, i);
        });
        const pairs = command.pairs.map(([k, v]): [string, string] => [expand(k), expand(v)]);
        for (const [k, v] of pairs) {
          const i = index.get(k);
          if (i !== undefined) list[i] = `${k}=${v}`;
          else {
            index.set(k, list.length);
            list.push(`${k}=${v}`);
          }
        }
        config.Env = list;
        break;
      }
      case 'label': {
        const pairs = command.pairs.map(([k, v]): [string, string] => [expand(k), expand(v)]);
        const labels = { ...(config.Labels ?? {}) };
        for (const [k, v] of pairs) labels[k] = v;
        config.Labels = labels;
        break;
      }
      case 'cmd':
      case 'entrypoint': {
        let line = command.cmdLine;
        if (command.prependShell && line !== null) {
          line = [...(config.Shell?.length ? config.Shell : DEFAULT_SHELL), ...line];
        }
        delete config.ArgsEscaped;
        if (command.kind === 'cmd') {
          config.Cmd = line;
          if ((command.cmdLine ?? []).length !== 0) cmdSet = true;
        } else {
          config.Entrypoint = line;
          if (!cmdSet) config.Cmd = null;
        }
        break;
      }
      case 'expose': {
        const words = command.ports.flatMap((p) => processWords(p, env, escapeToken));
        const exposed = words.flatMap(parsePortSpec);
        if (exposed.length > 0 || config.ExposedPorts) {
          const ports = { ...(config.ExposedPorts ?? {}) };
          for (const p of exposed) ports[p] = {};
          config.ExposedPorts = ports;
        }
        break;
      }
      case 'user': {
        config.User = expand(command.value);
        break;
      }
      case 'stopsignal': {
        const signal = expand(command.value);
        parseSignal(signal);
        config.StopSignal = signal;
        break;
      }
      case 'workdir': {
        const dir = expand(command.value);
        if (dir === '') throw invalidParameter('cannot normalize nothing');
        config.WorkingDir = dir.startsWith('/')
          ? dir
          : cleanPath(['/', config.WorkingDir ?? '', dir].filter((p) => p !== '').join('/'));
        break;
      }
      case 'volume': {
        const volumes = command.volumes.map(expand);
        const map = { ...(config.Volumes ?? {}) };
        for (const v of volumes) {
          if (v === '') throw invalidParameter('VOLUME specified can not be an empty string');
          map[v] = {};
        }
        config.Volumes = map;
        break;
      }
      case 'onbuild': {
        config.OnBuild = [...(config.OnBuild ?? []), command.expression];
        break;
      }
      case 'healthcheck': {
        config.Healthcheck = command.health;
        break;
      }
    }
  }
  return config;
}
