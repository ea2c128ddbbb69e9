import { invalidParameter } from '../../../common/errors.js';

/**
 * The part of Go's text/template that swarmkit's templates use, evaluated the way Go does
 * (template named `expansion`, `missingkey=error`): text, comments, `{{-`/`-}}` trimming,
 * pipelines (`a | f`), fields (`.A.B`, a map's keys too), variables (`$`, `$x`), parenthesised
 * calls, string/number/bool literals, `if`/`else if`/`else`/`end`, `with` and `range` (over a map,
 * keys sorted, with `$k, $v :=`), the builtins `and or not eq ne lt le gt ge index len print
 * printf println`, and functions of the caller (swarmkit's `join`, `env`, `secret`, `config`).
 * Errors read as Go's: `template: expansion:L: …` for a parse error, `template: expansion:L:C:
 * executing "expansion" at <…>: …` for an execution error. Anything else (`define`, `template`,
 * `block`, assignments) is a parse error.
 */

/** A Go map[string]string (printed `map[k:v …]`, keys sorted). */
export class GoMap {
  constructor(readonly entries: Record<string, string>) {}
}

/** A value a template handles: a Go struct is a plain object of values. */
export type GoValue = string | number | boolean | GoMap | GoStruct | undefined;
export interface GoStruct {
  [field: string]: GoValue;
}

export type GoFunc = (...args: GoValue[]) => GoValue;

const NAME = 'expansion';

class TemplateError extends Error {}

// ---- lexing of one action's body ----

type Tok =
  | { k: 'field'; v: string[]; pos: number; text: string }
  | { k: 'var'; v: string; fields: string[]; pos: number; text: string }
  | { k: 'ident'; v: string; pos: number; text: string }
  | { k: 'str'; v: string; pos: number; text: string }
  | { k: 'num'; v: number; pos: number; text: string }
  | { k: 'pipe' | 'lparen' | 'rparen' | 'decl' | 'comma'; pos: number; text: string };

function lineOf(src: string, pos: number): number {
  let n = 1;
  for (let i = 0; i < pos && i < src.length; i++) if (src[i] === '\n') n++;
  return n;
}

function parseError(src: string, pos: number, msg: string): TemplateError {
  return new TemplateError(`template: ${NAME}:${lineOf(src, pos)}: ${msg}`);
}

function lexAction(src: string, start: number, end: number): Tok[] {
  const toks: Tok[] = [];
  let i = start;
  const ident = /[A-Za-z0-9_]/;
  while (i < end) {
    const c = src[i] as string;
    if (c === ' ' || c === '\t' || c === '\r' || c === '\n') {
      i++;
    } else if (c === '|') {
      toks.push({ k: 'pipe', pos: i, text: c });
      i++;
    } else if (c === '(') {
      toks.push({ k: 'lparen', pos: i, text: c });
      i++;
    } else if (c === ')') {
      toks.push({ k: 'rparen', pos: i, text: c });
      i++;
    } else if (c === ',') {
      toks.push({ k: 'comma', pos: i, text: c });
      i++;
    } else if (c === ':' && src[i + 1] === '=') {
      toks.push({ k: 'decl', pos: i, text: ':=' });
      i += 2;
    } else if (c === '"') {
      let j = i + 1;
      while (j < end && src[j] !== '"') {
        if (src[j] === '\\') j++;
        if (src[j] === '\n') throw parseError(src, i, 'unterminated quoted string');
        j++;
      }
      if (j >= end) throw parseError(src, i, 'unterminated quoted string');
      const text = src.slice(i, j + 1);
      let v: string;
      try {
        v = JSON.parse(text.replace(/\\x([0-9a-fA-F]{2})/g, '\\u00$1')) as string;
      } catch {
        throw parseError(src, i, `invalid syntax: ${text}`);
      }
      toks.push({ k: 'str', v, pos: i, text });
      i = j + 1;
    } else if (c === '`') {
      const j = src.indexOf('`', i + 1);
      if (j < 0 || j >= end) throw parseError(src, i, 'unterminated raw quoted string');
      toks.push({ k: 'str', v: src.slice(i + 1, j), pos: i, text: src.slice(i, j + 1) });
      i = j + 1;
    } else if (c === '.' || c === '$') {
      let j = i + 1;
      if (c === '$') while (j < end && ident.test(src[j] as string)) j++;
      const head = src.slice(i, j);
      const fields: string[] = [];
      // `.A.B`, `$x.A`: the chain of field names
      let k = c === '.' ? i : j;
      while (k < end && src[k] === '.') {
        let m = k + 1;
        while (m < end && ident.test(src[m] as string)) m++;
        if (m === k + 1) {
          if (c === '.' && k === i && fields.length === 0) break;
          throw parseError(src, k, 'unexpected . after term');
        }
        fields.push(src.slice(k + 1, m));
        k = m;
      }
      const text = src.slice(i, Math.max(k, j));
      if (c === '.') toks.push({ k: 'field', v: fields, pos: i, text });
      else toks.push({ k: 'var', v: head, fields, pos: i, text });
      i = Math.max(k, j);
    } else if (/[0-9-+]/.test(c)) {
      const m = /^[-+]?(0x[0-9a-fA-F]+|[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?)/.exec(src.slice(i, end));
      if (!m) throw parseError(src, i, `bad number syntax: "${c}"`);
      toks.push({ k: 'num', v: Number(m[0]), pos: i, text: m[0] });
      i += m[0].length;
    } else if (ident.test(c)) {
      let j = i;
      while (j < end && ident.test(src[j] as string)) j++;
      toks.push({ k: 'ident', v: src.slice(i, j), pos: i, text: src.slice(i, j) });
      i = j;
    } else {
      throw parseError(src, i, `unexpected ${JSON.stringify(c)} in command`);
    }
  }
  return toks;
}

// ---- the parse tree ----

type Operand =
  | { k: 'field'; fields: string[]; pos: number; text: string }
  | { k: 'var'; name: string; fields: string[]; pos: number; text: string }
  | { k: 'lit'; v: GoValue; pos: number; text: string }
  | { k: 'call'; name: string; pos: number; text: string }
  | { k: 'paren'; pipe: Pipeline; pos: number; text: string };

interface Command {
  args: Operand[];
  pos: number;
  text: string;
}

interface Pipeline {
  decl: string[];
  cmds: Command[];
  pos: number;
}

type Node =
  | { k: 'text'; v: string }
  | { k: 'action'; pipe: Pipeline }
  | { k: 'if' | 'with' | 'range'; pipe: Pipeline; list: Node[]; elseList: Node[] };

const BUILTINS = new Set([
  'and',
  'or',
  'not',
  'eq',
  'ne',
  'lt',
  'le',
  'gt',
  'ge',
  'index',
  'len',
  'print',
  'printf',
  'println',
]);

class Parser {
  private pos = 0;
  constructor(
    private readonly src: string,
    private readonly funcs: Set<string>,
  ) {}

  /** The whole template; throws Go's parse errors. */
  parse(): Node[] {
    const { list, end } = this.list();
    if (end) throw parseError(this.src, end.pos, `unexpected {{${end.word}}}`);
    return list;
  }

  /** Nodes up to an `{{end}}`/`{{else…}}` (returned) or the end of the text. */
  private list(): { list: Node[]; end?: { word: string; pos: number; rest: Tok[] } } {
    const list: Node[] = [];
    for (;;) {
      const open = this.src.indexOf('{{', this.pos);
      if (open < 0) {
        if (this.pos < this.src.length) list.push({ k: 'text', v: this.src.slice(this.pos) });
        this.pos = this.src.length;
        return { list };
      }
      let text = this.src.slice(this.pos, open);
      let bodyStart = open + 2;
      if (/^-[ \t\r\n]/.test(this.src.slice(bodyStart, bodyStart + 2))) {
        text = text.replace(/[ \t\r\n]+$/, '');
        bodyStart += 1;
      }
      if (text) list.push({ k: 'text', v: text });
      const { bodyEnd, next } = this.closeOf(open, bodyStart);
      this.pos = next;
      const body = this.src.slice(bodyStart, bodyEnd).trim();
      if (body.startsWith('/*')) {
        if (!body.endsWith('*/')) throw parseError(this.src, open, 'unclosed comment');
        continue;
      }
      const toks = lexAction(this.src, bodyStart, bodyEnd);
      const first = toks[0];
      if (!first) throw parseError(this.src, open, 'missing value for command');
      if (first.k === 'ident' && (first.v === 'end' || first.v === 'else'))
        return { list, end: { word: first.v, pos: first.pos, rest: toks.slice(1) } };
      if (first.k === 'ident' && (first.v === 'if' || first.v === 'with' || first.v === 'range')) {
        list.push(this.control(first.v, toks.slice(1), first.pos));
        continue;
      }
      if (first.k === 'ident' && ['define', 'template', 'block', 'break', 'continue'].includes(first.v))
        throw parseError(this.src, first.pos, `{{${first.v}}} is not supported here`);
      list.push({ k: 'action', pipe: this.pipeline(toks, open) });
    }
  }

  /** Where the action opened at `open` ends (its `}}`, after a `-` trim of what follows). */
  private closeOf(open: number, bodyStart: number): { bodyEnd: number; next: number } {
    let i = bodyStart;
    let inStr: string | undefined;
    for (; i < this.src.length; i++) {
      const c = this.src[i];
      if (inStr) {
        if (c === '\\' && inStr === '"') i++;
        else if (c === inStr) inStr = undefined;
        continue;
      }
      if (c === '"' || c === '`') inStr = c;
      else if (c === '}' && this.src[i + 1] === '}') break;
    }
    if (i >= this.src.length) throw parseError(this.src, open, 'unclosed action');
    if (/[ \t\r\n]-$/.test(this.src.slice(i - 2, i))) {
      let next = i + 2;
      while (next < this.src.length && /[ \t\r\n]/.test(this.src[next] as string)) next++;
      return { bodyEnd: i - 1, next };
    }
    return { bodyEnd: i, next: i + 2 };
  }

  private control(word: 'if' | 'with' | 'range', toks: Tok[], pos: number): Node {
    if (toks.length === 0) throw parseError(this.src, pos, `missing value for ${word}`);
    const pipe = this.pipeline(toks, pos, word === 'range' ? 2 : 1);
    const body = this.list();
    if (!body.end) throw parseError(this.src, pos, `unexpected EOF`);
    let elseList: Node[] = [];
    if (body.end.word === 'else') {
      const rest = body.end.rest;
      const r0 = rest[0];
      if (r0 && r0.k === 'ident' && (r0.v === 'if' || r0.v === 'with') && word === r0.v) {
        // `{{else if …}}`: a nested if that ends with this one's {{end}}
        elseList = [this.control(r0.v, rest.slice(1), r0.pos)];
      } else {
        if (rest.length) throw parseError(this.src, body.end.pos, `unexpected ${rest[0]?.text} in else`);
        const tail = this.list();
        if (tail.end?.word !== 'end')
          throw parseError(this.src, pos, tail.end ? 'expected end; found {{else}}' : 'unexpected EOF');
        elseList = tail.list;
      }
    } else if (body.end.rest.length) {
      throw parseError(this.src, body.end.pos, `unexpected ${body.end.rest[0]?.text} in end`);
    }
    return { k: word, pipe, list: body.list, elseList };
  }

  private pipeline(toks: Tok[], pos: number, maxDecl = 1): Pipeline {
    let decl: string[] = [];
    const di = toks.findIndex((t) => t.k === 'decl');
    if (di >= 0) {
      const names = toks.slice(0, di).filter((t) => t.k !== 'comma');
      if (names.length === 0 || names.length > maxDecl || names.some((t) => t.k !== 'var' || t.fields.length))
        throw parseError(this.src, pos, 'too many declarations in command');
      decl = names.map((t) => (t as { v: string }).v);
      toks = toks.slice(di + 1);
    }
    const cmds: Command[] = [];
    let i = 0;
    const operand = (): Operand => {
      const t = toks[i++] as Tok;
      switch (t.k) {
        case 'field':
          return { k: 'field', fields: t.v, pos: t.pos, text: t.text };
        case 'var':
          return { k: 'var', name: t.v, fields: t.fields, pos: t.pos, text: t.text };
        case 'str':
        case 'num':
          return { k: 'lit', v: t.v, pos: t.pos, text: t.text };
        case 'ident': {
          if (t.v === 'true' || t.v === 'false')
            return { k: 'lit', v: t.v === 'true', pos: t.pos, text: t.text };
          if (t.v === 'nil') throw parseError(this.src, t.pos, 'nil is not a command');
          if (!BUILTINS.has(t.v) && !this.funcs.has(t.v))
            throw parseError(this.src, t.pos, `function "${t.v}" not defined`);
          return { k: 'call', name: t.v, pos: t.pos, text: t.text };
        }
        case 'lparen': {
          let depth = 1;
          let j = i;
          for (; j < toks.length; j++) {
            const k = toks[j]?.k;
            if (k === 'lparen') depth++;
            if (k === 'rparen' && --depth === 0) break;
          }
          if (j >= toks.length) throw parseError(this.src, t.pos, 'unclosed left paren');
          const inner = this.pipeline(toks.slice(i, j), t.pos);
          i = j + 1;
          return {
            k: 'paren',
            pipe: inner,
            pos: t.pos,
            text: this.src.slice(t.pos, (toks[j] as Tok).pos + 1),
          };
        }
        default:
          throw parseError(this.src, t.pos, `unexpected ${JSON.stringify(t.text)} in operand`);
      }
    };
    while (i < toks.length) {
      const args: Operand[] = [];
      const start = toks[i] as Tok;
      while (i < toks.length && toks[i]?.k !== 'pipe') args.push(operand());
      if (args.length === 0) throw parseError(this.src, start.pos, 'missing value for command');
      const last = args[args.length - 1] as Operand;
      cmds.push({ args, pos: start.pos, text: this.src.slice(start.pos, last.pos + last.text.length) });
      if (i < toks.length) {
        i++; // the pipe
        if (i >= toks.length) throw parseError(this.src, (toks[i - 1] as Tok).pos, 'missing command after |');
      }
    }
    if (cmds.length === 0) throw parseError(this.src, pos, 'missing value for command');
    return { decl, cmds, pos };
  }
}

// ---- values ----

/** Go's `fmt.Sprint` of one value. */
export function goPrint(v: GoValue): string {
  if (v === undefined) return '<nil>';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (v instanceof GoMap) {
    const keys = Object.keys(v.entries).sort();
    return `map[${keys.map((k) => `${k}:${v.entries[k]}`).join(' ')}]`;
  }
  return `{${Object.values(v).map(goPrint).join(' ')}}`;
}

function truth(v: GoValue): boolean {
  if (v === undefined) return false;
  if (typeof v === 'string') return v.length > 0;
  if (typeof v === 'number') return v !== 0;
  if (typeof v === 'boolean') return v;
  if (v instanceof GoMap) return Object.keys(v.entries).length > 0;
  return true;
}

function typeName(v: GoValue): string {
  if (v === undefined) return 'nil';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'number') return Number.isInteger(v) ? 'int' : 'float64';
  if (typeof v === 'boolean') return 'bool';
  if (v instanceof GoMap) return 'map[string]string';
  return `struct { ${Object.entries(v)
    .map(([k, x]) => `${k} ${typeName(x)}`)
    .join('; ')} }`;
}

/** `fmt.Sprint` of operands: a space between two operands when neither is a string. */
function sprint(args: GoValue[]): string {
  let out = '';
  args.forEach((a, i) => {
    if (i > 0 && typeof a !== 'string' && typeof args[i - 1] !== 'string') out += ' ';
    out += goPrint(a);
  });
  return out;
}

function sprintf(format: GoValue, args: GoValue[]): string {
  if (typeof format !== 'string')
    throw new Error(`wrong type for value; expected string; got ${typeName(format)}`);
  let n = 0;
  return format.replace(/%([-+# 0]*\d*(?:\.\d+)?)([a-zA-Z%])/g, (all, _flags: string, verb: string) => {
    if (verb === '%') return '%';
    if (n >= args.length) return `%!${verb}(MISSING)`;
    const a = args[n++];
    switch (verb) {
      case 's':
      case 'v':
        return goPrint(a);
      case 'q':
        return typeof a === 'string' ? JSON.stringify(a) : `%!q(${typeName(a)}=${goPrint(a)})`;
      case 'd':
        return typeof a === 'number' && Number.isInteger(a) ? String(a) : `%!d(${typeName(a)}=${goPrint(a)})`;
      case 't':
        return typeof a === 'boolean' ? String(a) : `%!t(${typeName(a)}=${goPrint(a)})`;
      default:
        return all;
    }
  });
}

function compare(name: string, a: GoValue, b: GoValue): boolean {
  const basic = (v: GoValue) => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
  if (!basic(a) || !basic(b)) throw new Error('invalid type for comparison');
  if (typeof a !== typeof b) throw new Error('incompatible types for comparison');
  if (name === 'eq') return a === b;
  if (name === 'ne') return a !== b;
  if (typeof a === 'boolean') throw new Error('invalid type for comparison');
  const x = a as string | number;
  const y = b as string | number;
  return name === 'lt' ? x < y : name === 'le' ? x <= y : name === 'gt' ? x > y : x >= y;
}

function builtin(name: string, args: GoValue[]): GoValue {
  const arity = (n: number) => {
    if (args.length !== n) throw new Error(`wrong number of args for ${name}: want ${n} got ${args.length}`);
  };
  switch (name) {
    case 'print':
      return sprint(args);
    case 'println':
      return `${args.map(goPrint).join(' ')}\n`;
    case 'printf':
      if (args.length === 0) throw new Error('wrong number of args for printf: want at least 1 got 0');
      return sprintf(args[0], args.slice(1));
    case 'not':
      arity(1);
      return !truth(args[0]);
    case 'and': {
      if (args.length === 0) throw new Error('wrong number of args for and: want at least 1 got 0');
      for (const a of args) if (!truth(a)) return a;
      return args[args.length - 1];
    }
    case 'or': {
      if (args.length === 0) throw new Error('wrong number of args for or: want at least 1 got 0');
      for (const a of args) if (truth(a)) return a;
      return args[args.length - 1];
    }
    case 'len': {
      arity(1);
      const a = args[0];
      if (typeof a === 'string') return Buffer.byteLength(a);
      if (a instanceof GoMap) return Object.keys(a.entries).length;
      throw new Error(`len of type ${typeName(a)}`);
    }
    case 'index': {
      if (args.length === 0) throw new Error('wrong number of args for index: want at least 1 got 0');
      let v = args[0];
      for (const key of args.slice(1)) {
        if (v instanceof GoMap) {
          if (typeof key !== 'string') throw new Error(`value has type ${typeName(key)}; should be string`);
          v = v.entries[key] ?? '';
        } else if (typeof v === 'string' && typeof key === 'number') {
          if (key < 0 || key >= Buffer.byteLength(v)) throw new Error(`index out of range: ${key}`);
          v = Buffer.from(v)[key] as number;
        } else {
          throw new Error(`can't index item of type ${typeName(v)}`);
        }
      }
      return v;
    }
    default: {
      arity(2);
      return compare(name, args[0], args[1]);
    }
  }
}

// ---- execution ----

class Exec {
  private out = '';
  private vars: { name: string; value: GoValue }[] = [];

  constructor(
    private readonly src: string,
    private readonly funcs: Record<string, GoFunc>,
  ) {}

  run(nodes: Node[], dot: GoValue): string {
    this.vars = [{ name: '$', value: dot }];
    this.walk(nodes, dot);
    return this.out;
  }

  private fail(at: { pos: number; text: string }, msg: string): TemplateError {
    const before = this.src.slice(0, at.pos);
    const line = lineOf(this.src, at.pos);
    const col = at.pos - (before.lastIndexOf('\n') + 1);
    return new TemplateError(`template: ${NAME}:${line}:${col}: executing "${NAME}" at <${at.text}>: ${msg}`);
  }

  private walk(nodes: Node[], dot: GoValue): void {
    for (const n of nodes) {
      if (n.k === 'text') {
        this.out += n.v;
      } else if (n.k === 'action') {
        const v = this.pipe(n.pipe, dot);
        if (n.pipe.decl.length === 0) this.out += v === undefined ? '<no value>' : goPrint(v);
      } else {
        this.control(n, dot);
      }
    }
  }

  private control(n: Extract<Node, { k: 'if' | 'with' | 'range' }>, dot: GoValue): void {
    const mark = this.vars.length;
    if (n.k === 'range') {
      const decl = n.pipe.decl;
      const v = this.pipe({ ...n.pipe, decl: [] }, dot);
      let items: [GoValue, GoValue][];
      if (v instanceof GoMap)
        items = Object.keys(v.entries)
          .sort()
          .map((k) => [k, v.entries[k]]);
      else if (typeof v === 'number' && Number.isInteger(v))
        items = [...Array(Math.max(v, 0)).keys()].map((i) => [i, i]);
      else if (v === undefined) items = [];
      else throw this.fail(n.pipe.cmds[0] as Command, `range can't iterate over ${goPrint(v)}`);
      if (items.length === 0) this.walk(n.elseList, dot);
      for (const [k, item] of items) {
        if (decl.length === 2)
          this.vars.push({ name: decl[0] as string, value: k }, { name: decl[1] as string, value: item });
        else if (decl.length === 1) this.vars.push({ name: decl[0] as string, value: item });
        this.walk(n.list, item);
        this.vars.length = mark;
      }
      return;
    }
    const v = this.pipe(n.pipe, dot);
    if (truth(v)) this.walk(n.list, n.k === 'with' ? v : dot);
    else this.walk(n.elseList, dot);
    this.vars.length = mark;
  }

  private pipe(p: Pipeline, dot: GoValue): GoValue {
    let v: GoValue;
    let piped = false;
    for (const c of p.cmds) {
      v = this.command(c, dot, piped ? [v] : []);
      piped = true;
    }
    for (const name of p.decl) this.vars.push({ name, value: v });
    return v;
  }

  private command(c: Command, dot: GoValue, extra: GoValue[]): GoValue {
    const [head, ...rest] = c.args as [Operand, ...Operand[]];
    if (head.k === 'call') {
      const args = [...rest.map((a) => this.operand(a, dot)), ...extra];
      try {
        if (BUILTINS.has(head.name)) return builtin(head.name, args);
        const f = this.funcs[head.name] as GoFunc;
        return f(...args);
      } catch (err) {
        if (err instanceof TemplateError) throw err;
        const msg = (err as Error).message;
        throw this.fail(c, `error calling ${head.name}: ${msg}`);
      }
    }
    if (rest.length > 0 || extra.length > 0)
      throw this.fail(c, `can't give argument to non-function ${head.text}`);
    return this.operand(head, dot);
  }

  private operand(o: Operand, dot: GoValue): GoValue {
    switch (o.k) {
      case 'lit':
        return o.v;
      case 'paren':
        return this.pipe(o.pipe, dot);
      case 'call':
        return this.command({ args: [o], pos: o.pos, text: o.text }, dot, []);
      case 'field':
        return this.fields(dot, o.fields, o);
      case 'var': {
        const found = [...this.vars].reverse().find((v) => v.name === o.name);
        if (!found) throw this.fail(o, `undefined variable: ${o.name}`);
        return this.fields(found.value, o.fields, o);
      }
    }
  }

  private fields(v: GoValue, names: string[], at: { pos: number; text: string }): GoValue {
    for (const name of names) {
      if (v instanceof GoMap) {
        if (!(name in v.entries)) throw this.fail(at, `map has no entry for key "${name}"`);
        v = v.entries[name];
      } else if (v !== undefined && typeof v === 'object' && name in v) {
        v = v[name];
      } else if (v === undefined) {
        throw this.fail(at, `nil pointer evaluating interface {}.${name}`);
      } else {
        throw this.fail(at, `can't evaluate field ${name} in type ${typeName(v)}`);
      }
    }
    return v;
  }
}

/** `src` executed with `dot` as Go would; its errors are invalidParameter with Go's text. */
export function executeGoTemplate(src: string, dot: GoValue, funcs: Record<string, GoFunc> = {}): string {
  try {
    const nodes = new Parser(src, new Set(Object.keys(funcs))).parse();
    return new Exec(src, funcs).run(nodes, dot);
  } catch (err) {
    if (err instanceof TemplateError) throw invalidParameter(err.message);
    throw err;
  }
}
