import { invalidParameter } from '../../../common/errors.js';
import { goQuote, isDigit, isLetter, isSpace } from './go-text.js';
import { PatternError, replacePattern, trimPrefix, trimSuffix } from './shell-patterns.js';

/** Word expansion of Dockerfile arguments as buildkit's shell lexer does it: quotes, escapes, `$VAR`, `${VAR:-x}` and friends, splitting into words. */
export class LexError extends Error {}

export class Words {
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

/** A pattern operation; a pattern that is no regular expression is the lexer's error. */
function patternOp(pattern: string, op: () => string): string {
  try {
    return op();
  } catch (err) {
    if (err instanceof PatternError)
      throw new LexError(`invalid pattern (${pattern}) in substitution: ${err.message}`);
    throw err;
  }
}

export class ShellWord {
  private readonly chars: string[];
  private pos = 0;

  constructor(
    source: string,
    private readonly envs: Map<string, string>,
    private readonly escapeToken: string,
    /** The newer lexer's forms (`${V-x}`, `${V+x}`, `${V#p}`, `${V%p}`, `${V/p/r}`); dockerd 20.10's has only `${V:…}` and `${V?…}`. */
    private readonly extended = false,
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

  processStopOn(stop: string | undefined, rawEscapes = false): { word: string; words: string[] } {
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
        if (rawEscapes) {
          words.addRawChar(c);
          result += c;
        }
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

  /** A here-document's body: variables expanded, quotes kept, the escape token only escaping `$` and itself. */
  processHeredoc(): string {
    let result = '';
    for (;;) {
      const ch = this.peek();
      if (ch === undefined) return result;
      if (ch === '$') {
        result += this.dollar();
        continue;
      }
      this.next();
      const after = this.peek();
      if (ch === this.escapeToken && (after === '$' || after === this.escapeToken)) {
        result += this.next();
        continue;
      }
      result += ch;
    }
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
  private braceWord(stop = '}', rawEscapes = false): string {
    try {
      return this.processStopOn(stop, rawEscapes).word;
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
    if (ch === '?' || (this.extended && (ch === '-' || ch === '+'))) {
      const word = this.braceWord();
      if (ch === '-') return value ?? word;
      if (ch === '+') return value === undefined ? '' : word;
      if (value === undefined) throw new LexError(`${name}: ${word || 'is not allowed to be unset'}`);
      return value;
    }
    if (this.extended && (ch === '#' || ch === '%')) {
      let word = this.braceWord('}', true);
      const greedy = word.startsWith(ch);
      if (greedy) word = word.slice(1);
      const current = value ?? '';
      return patternOp(word, () =>
        ch === '%' ? trimSuffix(word, current, greedy) : trimPrefix(word, current, greedy),
      );
    }
    if (this.extended && ch === '/') {
      const all = this.peek() === '/';
      if (all) this.next();
      const pattern = this.braceWord('/', true);
      const replacement = this.braceWord('}', true);
      return patternOp(pattern, () => replacePattern(value ?? '', pattern, replacement, all));
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

export function buildEnvs(env: string[] | null | undefined): Map<string, string> {
  const envs = new Map<string, string>();
  for (const e of env ?? []) {
    const i = e.indexOf('=');
    if (i < 0) envs.set(e, '');
    else envs.set(e.slice(0, i), e.slice(i + 1));
  }
  return envs;
}

export function lex(word: string, env: string[] | null | undefined, escapeToken: string, extended = false) {
  try {
    return new ShellWord(word, buildEnvs(env), escapeToken, extended).processStopOn(undefined);
  } catch (err) {
    if (err instanceof LexError) throw invalidParameter(`failed to process ${goQuote(word)}: ${err.message}`);
    throw err;
  }
}

/** The lexer's ProcessWord: quotes, escapes and variables resolved, spacing kept (`extended`: the newer forms). */
export function processWord(
  word: string,
  env: string[] | null | undefined,
  escapeToken = '\\',
  extended = false,
): string {
  return lex(word, env, escapeToken, extended).word;
}

/** The lexer's ProcessWords: as processWord, then split into words (quoted parts stay whole). */
export function processWords(
  word: string,
  env: string[] | null | undefined,
  escapeToken = '\\',
  extended = false,
): string[] {
  return lex(word, env, escapeToken, extended).words;
}
