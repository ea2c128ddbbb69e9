import { invalidParameter } from '../../../common/errors.js';
import { fromBytes, goQuote, isSpace, toBytes, trimLeftSpace, trimSpace, WHITESPACE_RE } from './go-text.js';

/** The Dockerfile parser (buildkit's): parser directives, comments, line continuations, per-instruction argument forms (JSON arrays, name=value pairs, words). */
/** One instruction: its lower-case name, the whole line, builder flags and parsed arguments. */
export interface DockerfileNode {
  value: string;
  original: string;
  flags: string[];
  args: string[];
  json: boolean;
}

export interface Directives {
  escapeToken: string;
  continuation: RegExp;
  done: boolean;
  seen: Set<string>;
  /** Directive values by lower-case key. */
  values: Map<string, string>;
}

export interface LineArgs {
  args: string[];
  json: boolean;
}

export const MAX_LINE_BYTES = 64 * 1024;
export const DIRECTIVE_RE =
  /^#[\t\n\f\r ]*([a-zA-Z][a-zA-Z0-9]*)[\t\n\f\r ]*=[\t\n\f\r ]*([^\n]+?)[\t\n\f\r ]*$/;
export const NOT_STRING_ARRAY = 'when using JSON array syntax, arrays must be comprised of strings only';

export function setEscapeToken(d: Directives, token: string): void {
  if (token !== '`' && token !== '\\') {
    throw invalidParameter(`invalid escape token '${token}' does not match \` or \\`);
  }
  d.escapeToken = token;
  const e = token === '\\' ? '\\\\' : '`';
  d.continuation = new RegExp(`([^${e}])${e}[ \\t]*$|^${e}[ \\t]*$`);
}

export function possibleParserDirective(d: Directives, line: string): void {
  if (d.done) return;
  const m = DIRECTIVE_RE.exec(line);
  const key = m?.[1]?.toLowerCase();
  if (!m || (key !== 'escape' && key !== 'syntax')) {
    d.done = true;
    return;
  }
  if (d.seen.has(key)) throw invalidParameter(`only one ${key} parser directive can be used`);
  d.seen.add(key);
  d.values.set(key, m[2] as string);
  if (key === 'escape') setEscapeToken(d, m[2] as string);
}

export const isComment = (line: string): boolean => trimLeftSpace(line).startsWith('#');

export function processLine(d: Directives, line: string, stripLeft: boolean): string {
  const token = stripLeft ? trimLeftSpace(line) : line;
  possibleParserDirective(d, token);
  return token.startsWith('#') ? '' : token;
}

export function trimContinuation(line: string, d: Directives): [string, boolean] {
  if (d.continuation.test(line)) return [line.replace(d.continuation, '$1'), false];
  return [line, true];
}

/** Builder flags (`--name=value`) at the start of the arguments, walked byte by byte. */
export function extractBuilderFlags(line: string): [string, string[]] {
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

export function splitCommand(line: string): { cmd: string; flags: string[]; rest: string } {
  const t = trimSpace(line);
  const m = WHITESPACE_RE.exec(t);
  const cmd = (m ? t.slice(0, m.index) : t).toLowerCase();
  if (!m) return { cmd, flags: [], rest: '' };
  const [rest, flags] = extractBuilderFlags(t.slice(m.index + m[0].length));
  return { cmd, flags, rest: trimSpace(rest) };
}

/** Words of a statement, quotes and escapes kept (they are resolved when expanding). */
export function parseWords(rest: string, escapeToken: string): string[] {
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
export const wellFormed = (s: string): string =>
  s.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\ufffd');

/** End of the first JSON value of `t` (which starts with `[`), or -1. Later text is ignored. */
export function jsonValueEnd(t: string): number {
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

export function parseMaybeJSON(rest: string): LineArgs {
  if (rest === '') return { args: [], json: false };
  const exec = jsonForm(rest);
  return exec ? { args: exec, json: true } : { args: [rest], json: false };
}

export function parseStringsWhitespaceDelimited(rest: string): LineArgs {
  return { args: rest === '' ? [] : rest.split(WHITESPACE_RE), json: false };
}

export function parseMaybeJSONToList(rest: string): LineArgs {
  const exec = jsonForm(rest);
  return exec ? { args: exec, json: true } : parseStringsWhitespaceDelimited(rest);
}

export function parseString(rest: string): LineArgs {
  return { args: rest === '' ? [] : [rest], json: false };
}

/** ENV and LABEL: `name=value ...`, or the old `name value with spaces`. Pairs, flattened. */
export function parseNameVal(rest: string, key: string, d: Directives): LineArgs {
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
export function parseHealthConfig(rest: string): LineArgs {
  const b = toBytes(rest);
  let sep = 0;
  while (sep < b.length && !isSpace(b[sep])) sep++;
  let next = sep;
  while (next < b.length && isSpace(b[next])) next++;
  if (sep === 0) return { args: [], json: false };
  const cmd = parseMaybeJSON(fromBytes(b.slice(next)));
  return { args: [fromBytes(b.slice(0, sep)), ...cmd.args], json: cmd.json };
}

export const LINE_PARSERS: Record<string, (rest: string, d: Directives) => LineArgs> = {
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

export function newNodeFromLine(line: string, d: Directives): DockerfileNode {
  const { cmd, flags, rest } = splitCommand(line);
  const parse = Object.hasOwn(LINE_PARSERS, cmd) ? LINE_PARSERS[cmd] : undefined;
  // Unknown instructions parse, with an empty argument; they are refused later.
  const { args, json } = parse ? parse(rest, d) : { args: [''], json: false };
  return { value: cmd, original: line, flags, args, json };
}
